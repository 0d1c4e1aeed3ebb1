"""Writes codea1/data/bundled/stdin_problems.jsonl (python benchmarks/make_stdin_problems.py PATH): the team's own stdin problems; each
golden output is what the reference prints (checked against the hand-written expectation
where one is given)."""
import json, subprocess, sys

P = []

def add(slug, difficulty, question, reference, inputs, naive, edge, **meta):
    P.append(dict(slug=slug, difficulty=difficulty, question=question.strip(), reference=reference.strip() + "\n",
                  inputs=inputs, naive=naive.strip() + "\n", edge=edge, meta=meta))

add("sum-of-numbers", "easy", """
Read an integer n, then n integers (on the second line, separated by spaces). Print their sum.
When n is 0 the second line is empty.

Input:
3
1 2 3
Output:
6
""", """
import sys
data = sys.stdin.read().split()
n = int(data[0])
print(sum(int(x) for x in data[1:1 + n]))
""", ["3\n1 2 3\n", "0\n\n", "1\n-5\n", "5\n1000000000 1000000000 1000000000 1000000000 1000000000\n", "4\n-1 -2 3 4\n"],
"""
n = int(input())
print(sum(map(int, input().split())) if n > 1 else int(input()))
""", "n = 0 (an empty second line) and n = 1")

add("max-minus-min", "easy", """
Read n (n >= 1) and then n integers on one line. Print the largest minus the smallest.

Input:
4
3 9 1 4
Output:
8
""", """
n = int(input())
a = list(map(int, input().split()))
print(max(a) - min(a))
""", ["4\n3 9 1 4\n", "1\n7\n", "3\n-5 -2 -9\n", "2\n0 0\n", "5\n-3 10 -20 4 4\n"],
"""
n = int(input())
a = list(map(int, input().split()))
hi, lo = 0, 10**9
for x in a:
    hi = max(hi, x)
    lo = min(lo, x)
print(hi - lo)
""", "all numbers negative (the largest starts at 0)")

add("count-vowels", "easy", """
Read one line of text. Print how many of its letters are vowels (a, e, i, o, u), in
either case.

Input:
Hello World
Output:
3
""", """
s = input()
print(sum(1 for c in s.lower() if c in "aeiou"))
""", ["Hello World\n", "AEIOU aeiou\n", "rhythm\n", "Programming Contest 2024!\n", "x\n"],
"""
s = input()
print(sum(1 for c in s if c in "aeiou"))
""", "upper-case vowels")

add("reverse-words", "easy", """
Read one line of words separated by one or more spaces. Print the words in reverse order,
separated by single spaces.

Input:
the quick  brown fox
Output:
fox brown quick the
""", """
print(" ".join(reversed(input().split())))
""", ["the quick  brown fox\n", "single\n", "a b\n", "  lead and trail  \n", "one two three four five\n"],
"""
print(input()[::-1])
""", "reverses characters, not words")

add("fizzbuzz", "easy", """
Read n. For i = 1..n print one line: "FizzBuzz" if i is divisible by 15, "Fizz" if by 3,
"Buzz" if by 5, else i.

Input:
5
Output:
1
2
Fizz
4
Buzz
""", """
n = int(input())
for i in range(1, n + 1):
    print("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else i)
""", ["5\n", "15\n", "1\n", "16\n", "0\n"],
"""
n = int(input())
for i in range(1, n + 1):
    print("Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else "FizzBuzz" if i % 15 == 0 else i)
""", "15 checked after 3")

add("even-odd-count", "easy", """
Read n and then n integers. Print two numbers: how many are even and how many are odd.
Zero is even; negative numbers count by the same rule.

Input:
5
1 2 3 4 0
Output:
3 2
""", """
n = int(input())
a = list(map(int, input().split())) if n else []
even = sum(1 for x in a if x % 2 == 0)
print(even, len(a) - even)
""", ["5\n1 2 3 4 0\n", "3\n-1 -2 -3\n", "1\n0\n", "4\n7 9 11 13\n", "0\n\n"],
"""
n = int(input())
a = list(map(int, input().split()))
print(sum(1 for x in a if x > 0 and x % 2 == 0), sum(1 for x in a if x % 2 == 1))
""", "zero and negative even numbers")

add("gcd-and-lcm", "easy", """
Read two positive integers a and b on one line. Print their greatest common divisor and
their least common multiple, separated by a space.

Input:
4 6
Output:
2 12
""", """
from math import gcd
a, b = map(int, input().split())
g = gcd(a, b)
print(g, a // g * b)
""", ["4 6\n", "7 13\n", "12 12\n", "1 1000000\n", "18 24\n"],
"""
from math import gcd
a, b = map(int, input().split())
print(gcd(a, b), a * b)
""", "the lcm is not a * b when they share a factor")

add("palindrome-line", "easy", """
Read one line. Print YES if it reads the same backwards once every character that is not a
letter or digit is dropped and case is ignored, else NO.

Input:
A man, a plan, a canal: Panama
Output:
YES
""", """
s = [c.lower() for c in input() if c.isalnum()]
print("YES" if s == s[::-1] else "NO")
""", ["A man, a plan, a canal: Panama\n", "race a car\n", "Abba\n", "!!\n", "No lemon, no melon\n"],
"""
s = [c for c in input() if c.isalnum()]
print("YES" if s == s[::-1] else "NO")
""", "mixed case")

add("second-largest", "medium", """
Read n and then n integers. Print the second largest distinct value, or -1 when there
are fewer than two distinct values.

Input:
5
4 1 4 3 2
Output:
3
""", """
n = int(input())
values = sorted(set(map(int, input().split())))
print(values[-2] if len(values) >= 2 else -1)
""", ["5\n4 1 4 3 2\n", "3\n7 7 7\n", "2\n-1 -5\n", "1\n10\n", "6\n9 9 8 8 7 7\n"],
"""
n = int(input())
a = sorted(map(int, input().split()))
print(a[-2] if n >= 2 else -1)
""", "the largest value repeated")

add("range-sum-queries", "medium", """
Read n, then n integers a_1..a_n, then q, then q lines "l r" (1 <= l <= r <= n). For each
query print a_l + ... + a_r on its own line.

Input:
5
1 2 3 4 5
2
1 3
2 5
Output:
6
14
""", """
import sys
data = sys.stdin.read().split()
n = int(data[0])
prefix = [0]
for x in data[1:1 + n]:
    prefix.append(prefix[-1] + int(x))
q = int(data[1 + n])
out = []
for k in range(q):
    l, r = int(data[2 + n + 2 * k]), int(data[3 + n + 2 * k])
    out.append(prefix[r] - prefix[l - 1])
print("\\n".join(map(str, out)))
""", ["5\n1 2 3 4 5\n2\n1 3\n2 5\n", "1\n7\n1\n1 1\n", "4\n-1 -1 -1 -1\n3\n1 4\n2 2\n3 4\n", "3\n5 0 5\n1\n1 3\n"],
"""
import sys
data = sys.stdin.read().split()
n = int(data[0])
a = list(map(int, data[1:1 + n]))
q = int(data[1 + n])
for k in range(q):
    l, r = int(data[2 + n + 2 * k]), int(data[3 + n + 2 * k])
    print(sum(a[l:r]))
""", "1-based inclusive ranges (off by one)")

add("transpose", "medium", """
Read r and c, then r lines of c integers. Print the transpose: c lines of r integers each,
separated by spaces.

Input:
2 3
1 2 3
4 5 6
Output:
1 4
2 5
3 6
""", """
r, c = map(int, input().split())
m = [input().split() for _ in range(r)]
for j in range(c):
    print(" ".join(m[i][j] for i in range(r)))
""", ["2 3\n1 2 3\n4 5 6\n", "1 1\n9\n", "3 1\n1\n2\n3\n", "2 2\n1 2\n3 4\n"],
"""
r, c = map(int, input().split())
m = [input().split() for _ in range(r)]
for j in range(r):
    print(" ".join(m[i][j] for i in range(r)))
""", "non-square matrices")

add("most-frequent-word", "medium", """
Read one line of lower-case words separated by spaces. Print the word that occurs most
often; among equally frequent words print the alphabetically smallest.

Input:
b a b a c
Output:
a
""", """
from collections import Counter
counts = Counter(input().split())
best = max(counts.values())
print(min(w for w, k in counts.items() if k == best))
""", ["b a b a c\n", "zeta\n", "x y z\n", "dog cat dog cat cat\n", "b b a\n"],
"""
from collections import Counter
print(Counter(input().split()).most_common(1)[0][0])
""", "ties go to the alphabetically smallest")

add("to-binary", "easy", """
Read a non-negative integer n. Print n in binary without leading zeros ("0" for zero).

Input:
10
Output:
1010
""", """
print(bin(int(input()))[2:])
""", ["10\n", "0\n", "1\n", "255\n", "1024\n"],
"""
n = int(input())
s = ""
while n > 0:
    s = str(n % 2) + s
    n //= 2
print(s)
""", "zero prints nothing")

add("average", "easy", """
Read n (n >= 1) and then n integers. Print their average. An answer within 1e-6 of the
true value (absolute or relative) is accepted.

Input:
3
1 2 4
Output:
2.3333333333
""", """
n = int(input())
a = list(map(int, input().split()))
print(f"{sum(a) / n:.10f}")
""", ["3\n1 2 4\n", "1\n5\n", "2\n-1 2\n", "4\n1 1 1 2\n"],
"""
n = int(input())
a = list(map(int, input().split()))
print(sum(a) // n)
""", "integer division", float_tolerance=1e-6)

add("count-inversions", "medium", """
Read n and then n integers. Print the number of pairs i < j with a_i > a_j (equal values
are not an inversion).

Input:
4
3 1 2 1
Output:
4
""", """
n = int(input())
a = list(map(int, input().split()))
print(sum(1 for i in range(n) for j in range(i + 1, n) if a[i] > a[j]))
""", ["4\n3 1 2 1\n", "3\n1 2 3\n", "3\n2 2 2\n", "5\n5 4 3 2 1\n", "1\n1\n"],
"""
n = int(input())
a = list(map(int, input().split()))
print(sum(1 for i in range(n) for j in range(i + 1, n) if a[i] >= a[j]))
""", "equal values")

add("balanced-brackets", "medium", """
Read one line made of the characters ()[]{}. Print YES if the brackets are balanced and
properly nested, else NO. An empty line is balanced.

Input:
([]{})
Output:
YES
""", """
s = input().strip()
stack, pairs = [], {")": "(", "]": "[", "}": "{"}
ok = True
for c in s:
    if c in "([{":
        stack.append(c)
    elif not stack or stack.pop() != pairs[c]:
        ok = False
        break
print("YES" if ok and not stack else "NO")
""", ["([]{})\n", "([)]\n", "\n", "((\n", "{[()()]}\n", ")(\n"],
"""
s = input().strip()
ok = s.count("(") == s.count(")") and s.count("[") == s.count("]") and s.count("{") == s.count("}")
print("YES" if ok else "NO")
""", "crossed pairs like ([)]")

add("leap-years", "easy", """
Read t, then t years (one a line). For each print YES if it is a leap year in the
Gregorian calendar (divisible by 4, except centuries not divisible by 400), else NO.

Input:
3
2000
1900
2024
Output:
YES
NO
YES
""", """
t = int(input())
for _ in range(t):
    y = int(input())
    print("YES" if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else "NO")
""", ["3\n2000\n1900\n2024\n", "1\n2023\n", "2\n2100\n2400\n", "4\n4\n100\n400\n1\n"],
"""
t = int(input())
for _ in range(t):
    print("YES" if int(input()) % 4 == 0 else "NO")
""", "centuries")

add("run-length", "medium", """
Read one non-empty line of lower-case letters. Print its run-length encoding: each maximal
run of one letter as the letter followed by the run's length.

Input:
aaabcc
Output:
a3b1c2
""", """
s = input().strip()
out, i = [], 0
while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
        j += 1
    out.append(f"{s[i]}{j - i}")
    i = j
print("".join(out))
""", ["aaabcc\n", "a\n", "abc\n", "zzzzzzzzzzzz\n", "aabbaa\n"],
"""
s = input().strip()
out, count = [], 1
for i in range(1, len(s)):
    if s[i] == s[i - 1]:
        count += 1
    else:
        out.append(f"{s[i - 1]}{count}")
        count = 1
print("".join(out))
""", "the last run is dropped")

add("pair-with-sum", "hard", """
Read n and a target t, then n integers. Print two 1-based positions i < j with
a_i + a_j = t (any such pair is accepted), or -1 if there is none.

Input:
4 9
2 7 11 15
Output:
1 2
""", """
n, t = map(int, input().split())
a = list(map(int, input().split()))
seen = {}
for j, x in enumerate(a):
    if t - x in seen:
        print(seen[t - x] + 1, j + 1)
        break
    seen.setdefault(x, j)
else:
    print(-1)
""", ["4 9\n2 7 11 15\n", "3 6\n3 2 4\n", "2 6\n3 3\n", "3 10\n1 2 3\n", "4 8\n4 1 4 7\n"],
"""
n, t = map(int, input().split())
a = list(map(int, input().split()))
for i in range(n):
    for j in range(n):
        if a[i] + a[j] == t:
            print(i + 1, j + 1)
            raise SystemExit
print(-1)
""", "the same position used twice",
checker='''
def check(input_text, expected, output):
    """Any pair of positions i < j whose values add up to the target; -1 only when the reference found none."""
    lines = input_text.split("\\n")
    n, t = map(int, lines[0].split())
    a = list(map(int, lines[1].split()))
    got = output.split()
    if expected.split() == ["-1"]:
        return got == ["-1"]
    if len(got) != 2 or not all(x.lstrip("-").isdigit() for x in got):
        return False
    i, j = int(got[0]), int(got[1])
    return 1 <= i < j <= n and a[i - 1] + a[j - 1] == t
''')

add("triangle-kind", "easy", """
Read three positive integers (side lengths) on one line. Print "invalid" if they do not
make a triangle with positive area, else "equilateral", "isosceles" or "scalene".

Input:
3 4 5
Output:
scalene
""", """
a, b, c = sorted(map(int, input().split()))
if a + b <= c:
    print("invalid")
elif a == c:
    print("equilateral")
elif a == b or b == c:
    print("isosceles")
else:
    print("scalene")
""", ["3 4 5\n", "2 2 2\n", "1 2 3\n", "5 5 8\n", "1 1 10\n"],
"""
a, b, c = map(int, input().split())
if a == b == c:
    print("equilateral")
elif a == b or b == c or a == c:
    print("isosceles")
else:
    print("scalene")
""", "sides that make no triangle")

add("divisor-count", "medium", """
Read a positive integer n (n <= 10**12). Print how many positive divisors it has.

Input:
12
Output:
6
""", """
n = int(input())
count, d = 0, 1
while d * d <= n:
    if n % d == 0:
        count += 1 if d * d == n else 2
    d += 1
print(count)
""", ["12\n", "1\n", "36\n", "97\n", "1000000\n"],
"""
n = int(input())
count, d = 0, 1
while d * d <= n:
    if n % d == 0:
        count += 2
    d += 1
print(count)
""", "perfect squares count their root twice")

add("digital-root", "medium", """
Read a non-negative integer with up to 1000 digits. Repeatedly replace it by the sum of its
digits until one digit is left, and print that digit.

Input:
9875
Output:
2
""", """
s = input().strip()
while len(s) > 1:
    s = str(sum(int(c) for c in s))
print(s)
""", ["9875\n", "0\n", "9\n", "999999999999\n", "123456789123456789\n"],
"""
n = int(input())
print(n % 9)
""", "multiples of 9 give 9, not 0")

add("kth-smallest", "medium", """
Read T test cases. Each has a line "n k" and a line of n integers; print the k-th smallest
value (1-based, counting duplicates) on its own line.

Input:
2
3 1
5 3 4
4 3
1 1 2 2
Output:
3
2
""", """
t = int(input())
for _ in range(t):
    n, k = map(int, input().split())
    print(sorted(map(int, input().split()))[k - 1])
""", ["2\n3 1\n5 3 4\n4 3\n1 1 2 2\n", "1\n1 1\n-7\n", "1\n5 5\n9 8 7 6 5\n", "2\n3 2\n3 3 1\n2 2\n10 -10\n"],
"""
t = int(input())
for _ in range(t):
    n, k = map(int, input().split())
    print(sorted(set(map(int, input().split())))[k - 1])
""", "duplicates count")

add("grid-paths", "hard", """
Read r and c, then r lines of c characters, '.' free and '#' blocked. Count the paths from
the top-left to the bottom-right cell moving only right or down through free cells; print
the count modulo 1000000007 (0 when a corner is blocked).

Input:
3 3
...
.#.
...
Output:
2
""", """
MOD = 10**9 + 7
r, c = map(int, input().split())
g = [input().strip() for _ in range(r)]
ways = [[0] * c for _ in range(r)]
for i in range(r):
    for j in range(c):
        if g[i][j] == "#":
            continue
        if i == 0 and j == 0:
            ways[i][j] = 1
            continue
        ways[i][j] = ((ways[i - 1][j] if i else 0) + (ways[i][j - 1] if j else 0)) % MOD
print(ways[r - 1][c - 1])
""", ["3 3\n...\n.#.\n...\n", "1 1\n.\n", "1 1\n#\n", "2 2\n#.\n..\n", "3 4\n....\n....\n....\n"],
"""
MOD = 10**9 + 7
r, c = map(int, input().split())
g = [input().strip() for _ in range(r)]
ways = [[1] * c for _ in range(r)]
for i in range(1, r):
    for j in range(1, c):
        ways[i][j] = 0 if g[i][j] == "#" else (ways[i - 1][j] + ways[i][j - 1]) % MOD
print(ways[r - 1][c - 1])
""", "blocked cells in the first row or column, and a blocked start")

add("caesar-shift", "easy", """
Read a shift k (0 <= k <= 25) and then one line of text. Shift every letter k places
forward in the alphabet, wrapping around and keeping its case; leave other characters.

Input:
3
Hello, xyz!
Output:
Khoor, abc!
""", """
k = int(input())
s = input()
out = []
for ch in s:
    if ch.islower():
        out.append(chr((ord(ch) - 97 + k) % 26 + 97))
    elif ch.isupper():
        out.append(chr((ord(ch) - 65 + k) % 26 + 65))
    else:
        out.append(ch)
print("".join(out))
""", ["3\nHello, xyz!\n", "0\nabc\n", "25\nAbZ\n", "13\nWhy did the chicken cross the road?\n"],
"""
k = int(input())
s = input()
print("".join(chr(ord(ch) + k) if ch.isalpha() else ch for ch in s))
""", "wrapping past z")

def run(src, inp):
    r = subprocess.run([sys.executable, "-c", src], input=inp, capture_output=True, text=True, timeout=10)
    if r.returncode:
        raise SystemExit(f"reference failed: {r.stderr}\n{src}")
    return r.stdout

rows = []
counts = {}
for k, p in enumerate(P, 1):
    counts[p["difficulty"]] = counts.get(p["difficulty"], 0) + 1
    tests = [json.dumps({"input": i, "output": run(p["reference"], i)}, ensure_ascii=False, sort_keys=True) for i in p["inputs"]]
    meta = {"difficulty": p["difficulty"], "split": "heldout" if k % 5 == 0 else "train", "naive": p["naive"],
            "edge_case": p["edge"], "time_limit_s": 2.0}
    meta.update(p["meta"])
    if "checker" in meta:
        meta["checker"] = meta["checker"].strip() + "\n"
    rows.append({"id": f"stdin/{k:03d}-{p['slug']}", "question": p["question"], "entry_point": "", "reference": p["reference"],
                 "tests": tests, "test_program": None, "imports": "", "source": "bundled-stdin", "meta": meta, "kind": "stdin"})
with open(sys.argv[1], "w") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
print(len(rows), counts)
