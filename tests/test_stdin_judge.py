"""The stdin game's judge: every reward rule on hand-computed numbers, the comparison
rules, the test reader, the sandbox's stdin runs, and the red-team cases."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codea1.data import Problem
from codea1.data.stdin_io import io_test, normalize_input, outputs_match, parse_io_tests
from codea1.judge import Judge, JudgeConfig, ProblemRollout
from codea1.judge.judge import DUPLICATE, REFERENCE_RAISED, UNPARSABLE, WRONG_EXPECTATION
from codea1.sandbox import Executor, Limits, RunResult
from codea1.sandbox.stdio import program_outputs, stdin_job


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=2) as executor:
        yield executor


def _problem(reference: str, tests=(), **meta) -> Problem:
    return Problem(id="S/double", question="Read n. Print 2n.", entry_point="", reference=reference,
                   tests=[io_test(i, o) for i, o in tests], kind="stdin", meta={"time_limit_s": 0.5, **meta})


DOUBLE = "print(2 * int(input()))\n"
RIGHT = f"```python\n{DOUBLE}```"
PLUS_TWO = "```python\nprint(int(input()) + 2)\n```"
BROKEN = "```python\nprint(2 * int(input())\n```"
HANGS_ON_NEGATIVE = "```python\nn = int(input())\nwhile n < 0:\n    pass\nprint(2 * n)\n```"

SUITE = "\n".join([
    "```input\n2\n```\n```output\n4\n```",       # t1 right; PLUS_TWO passes it (2 + 2)
    "```input\n5\n```\n```output\n10\n```",      # t2 right
    "```input\n5\n```\n```output\n10\n```",      # t3 duplicate of t2
    "```input\nx\n```\n```output\n0\n```",       # t4: the reference raises
    "```input\n3\n```\n```output\n7\n```",       # t5 wrong expectation (the reference prints 6)
    "```input\n9\n```",                          # t6 an input without its output: unparsable
    "```input\n-1\n```\n```output\n-2\n```",     # t7 right; HANGS_ON_NEGATIVE times out
])
MISTAKE = io_test("0\n", "0\n")


class _Spy:
    """An executor that runs each job on `ex` and keeps it in `jobs`."""

    def __init__(self, ex, jobs: list):
        self.ex, self.jobs = ex, jobs

    def submit(self, job, priority=0.0):
        self.jobs.append(job)
        return self.ex.submit(job, priority=priority)

    def run_many(self, many):
        self.jobs.extend(many)
        return self.ex.run_many(many)


def test_every_reward_rule_on_hand_computed_numbers(ex):
    """G = 8, alpha = 0.5. Kept tests t1, t2, t5, t7 (valid = 4, a wrong expectation
    counts valid); invalid = duplicate + reference raised + wrong expectation + unparsable
    = 4; valid_ratio = min(4/8, 1 - 4/8) = 0.5. One Mistake Book test (input 0).
    Right: gen 4/4, mb 1 -> pass 1, attack (0 - 0 + 1)/2 = 0.5, reward 0.5.
    PLUS_TWO: passes t1 only -> gen 1/4, fail 3/8; mb 0 -> pass 0.125,
    attack (3/8 - 1 + 1)/2 = 0.1875, reward 0.25 + 0.09375 = 0.34375.
    HANGS: t7 times out -> gen 3/4, fail 1/8; mb 1 -> pass 0.875, attack 0.5625, reward 0.53125.
    BROKEN does not compile: code 0, test 0. Tried: counting a wrong expectation as not
    valid by default (strict) and a time-out as a pass: both changed these figures and failed."""
    judge = Judge(ex, JudgeConfig(suite_size=8, alpha=0.5))
    codes = [RIGHT, PLUS_TWO, BROKEN, HANGS_ON_NEGATIVE]
    [r] = judge.judge_step([ProblemRollout(_problem(DOUBLE), codes, [[SUITE]] * 4, mistakes=[MISTAKE])])
    assert r.usable and r.code_valid == [True, True, False, True]
    assert "does not compile" in r.code_errors[2]
    assert r.code_rewards == pytest.approx([1.0, 0.125, 0.0, 0.875])
    assert [row[0] for row in r.test_rewards] == pytest.approx([0.5, 0.34375, 0.0, 0.53125])
    s = r.suites[1][0]
    assert (s.valid, s.invalid) == (4, 4)
    assert s.invalid_kinds == {DUPLICATE: 1, REFERENCE_RAISED: 1, WRONG_EXPECTATION: 1, UNPARSABLE: 1}
    assert (s.valid_ratio, s.gen_pass_rate, s.gen_fail_rate, s.mb_pass_rate) == (0.5, 0.25, 0.375, 0.0)
    assert [t.kind for t in s.tests] == [None, None, DUPLICATE, REFERENCE_RAISED, WRONG_EXPECTATION, UNPARSABLE,
                                         None]
    wrong = s.tests[4]
    assert json.loads(wrong.normalized) == {"input": "3\n", "output": "6\n"}   # the corrected test is used
    assert r.suites[3][0].tests[6].failure.startswith("timeout")
    update = r.mistake_update()
    corrected = {k: io_test(i, o) for k, (i, o) in {"t2": ("5\n", "10\n"), "t5": ("3\n", "6\n"),
                                                     "t7": ("-1\n", "-2\n")}.items()}
    assert update.failed == {corrected["t2"]: 1, corrected["t5"]: 1, corrected["t7"]: 2}
    assert update.passed == {MISTAKE: 2}   # the right and the hanging program passed it


def test_strict_validity_only_mistake_book_neither_and_the_nonprintable_penalty(ex):
    """strict_validity: valid 3, ratio min(3/8, 4/8) = 0.375, reward 0.5 * 0.375 + 0.25 =
    0.4375 for the right program. A suite with no test: with the book, pass = mb = 1 and
    attack 0; without it, pass 0. Two NUL bytes in a 33-character suite cost 2/33."""
    judge = Judge(ex, JudgeConfig(suite_size=8, strict_validity=True))
    [r] = judge.judge_step([ProblemRollout(_problem(DOUBLE), [RIGHT], [[SUITE]], mistakes=[MISTAKE])])
    assert r.suites[0][0].valid == 3 and r.test_rewards[0][0] == pytest.approx(0.4375)
    judge = Judge(ex, JudgeConfig(suite_size=8))
    junk = "no tests here"
    noisy = "```input\n2\n```\n```output\n4\n```\n\x00\x00"
    assert len(noisy) == 33
    [with_book, without] = judge.judge_step([
        ProblemRollout(_problem(DOUBLE), [RIGHT], [[junk]], mistakes=[MISTAKE]),
        ProblemRollout(_problem(DOUBLE), [RIGHT, RIGHT], [[junk], [noisy]]),
    ])
    assert with_book.code_rewards == [1.0] and with_book.suites[0][0].attack == 0.0
    assert with_book.test_rewards[0][0] == 0.0          # valid_ratio 0, attack 0
    assert without.code_rewards[0] == 0.0              # neither book nor tests: pass 0
    noisy_suite = without.suites[1][0]
    assert noisy_suite.nonprintable == pytest.approx(2 / 33)
    # valid 1 -> ratio 1/8; the right program passes it: attack 0
    assert without.test_rewards[1][0] == pytest.approx(0.5 * 1 / 8 - 2 / 33)


def test_float_tolerance_and_a_special_checker(ex):
    """A float within the problem's tolerance passes, beyond it fails; with a checker any
    answer it accepts passes and a written output it accepts is a right expectation."""
    third = "print(1 / int(input()))\n"
    rounded = "```python\nprint(round(1 / int(input()), 4))\n```"
    coarse = "```python\nprint(round(1 / int(input()), 1))\n```"
    suite = "```input\n3\n```\n```output\n0.33333\n```"
    judge = Judge(ex, JudgeConfig(suite_size=1))
    [r] = judge.judge_step([ProblemRollout(_problem(third, float_tolerance=1e-3), [rounded, coarse],
                                           [[suite], [suite]])])
    assert r.code_rewards == [1.0, 0.0]
    assert r.suites[0][0].tests[0].valid                      # 0.33333 is within 1e-3
    # any divisor of n greater than 1 is accepted
    checker = "def check(inp, expected, output):\n    n = int(inp)\n    d = int(output)\n    return d > 1 and n % d == 0\n"
    smallest = "n = int(input())\nprint(next(d for d in range(2, n + 1) if n % d == 0))\n"
    itself = "```python\nprint(int(input()))\n```"
    half = "```python\nprint(int(input()) // 2)\n```"
    suite = "```input\n12\n```\n```output\n6\n```"          # 6 divides 12: right, though the reference prints 2
    [r] = judge.judge_step([ProblemRollout(_problem(smallest, checker=checker), [itself, half], [[suite], [suite]])])
    assert r.suites[0][0].tests[0].valid and r.suites[0][0].invalid == 0
    assert r.code_rewards == [1.0, 1.0]
    [r] = judge.judge_step([ProblemRollout(_problem(smallest, checker=checker), [half], [["```input\n9\n```\n"
                                                                                            "```output\n3\n```"]])])
    assert r.code_rewards == [0.0]                            # 9 // 2 = 4 does not divide 9


def test_a_checker_that_prints_decides_as_a_quiet_one(ex):
    """A checker that prints as it checks (a debug line with the outputs) gets the same
    verdicts as a quiet one, in the judge and for golden tests. Fault: its run's output
    counted against the sandbox's output cap, which stopped the run once its calls had
    printed 64 KiB: every later pair was a rejection (right written outputs wrong
    expectations, the reference itself failed)."""
    checker = ("def check(inp, expected, output):\n    print('checking', inp, output, '.' * 20000)\n"
               "    return output.split() == expected.split()\n")
    suite = "\n".join(f"```input\n{k}\n```\n```output\n{2 * k}\n```" for k in range(8))
    judge = Judge(ex, JudgeConfig(suite_size=8))
    [r] = judge.judge_step([ProblemRollout(_problem(DOUBLE, checker=checker), [RIGHT], [[suite]])])
    assert (r.suites[0][0].valid, r.suites[0][0].invalid) == (8, 0) and r.code_rewards == [1.0]
    golden = _problem(DOUBLE, tests=[(f"{k}\n", f"{2 * k}\n") for k in range(8)], checker=checker)
    [verdict] = judge.evaluate_golden_many([(golden, RIGHT)])
    assert verdict.passed, verdict.detail


def test_every_checker_run_gets_the_time_its_pairs_need():
    """The judge, golden verdicts and `eval tests` build their checker runs with one
    `checker_job`, whose time grows with the pairs (2 s each and 5 more) above what the
    limits allow. Fault: the budget was raised by the judge and golden verdicts alone, so
    `eval tests` checked under the program's time limit and a slow checker rejected right
    outputs there."""
    from codea1.sandbox import Limits
    from codea1.sandbox.stdio import checker_job

    job = checker_job("def check(i, e, o):\n    return True\n", [("1", "2", "2")] * 10,
                      Limits(timeout_s=3.0, stop_on_output=True))
    assert job.limits.timeout_s == 25.0 and job.limits.stop_on_output is False
    assert checker_job("", [("1", "2", "2")], Limits(timeout_s=60.0)).limits.timeout_s == 60.0


def test_a_lost_checker_run_is_a_sandbox_failure_of_the_golden_verdict(ex):
    """A golden verdict whose checker run the sandbox lost is `infra` (no verdict on the
    code), as one whose program run it lost. Fault: the lost run's verdicts read as
    rejections, so a right program failed its golden tests (golden reward 0)."""
    from codea1.judge.golden import golden_results

    checker = "def check(inp, expected, output):\n    return output.split() == expected.split()\n"
    problem = _problem(DOUBLE, tests=[("2\n", "4\n")], checker=checker)

    class LosesCheckers:
        def run_many(self, jobs):
            runs = ex.run_many([j for j in jobs if j.program != checker])
            return [RunResult(status="infra", infra_error="node lost") if j.program == checker else runs.pop(0)
                    for j in jobs]

    [verdict] = golden_results(LosesCheckers(), [(problem, DOUBLE)])
    assert verdict.infra and "node lost" in verdict.detail


def test_outputs_compare_by_tokens():
    assert outputs_match("1 2\n3\n", "1\n2   3")
    assert not outputs_match("1 2", "1 2 3") and not outputs_match("12", "1 2")
    assert not outputs_match("0.3334", "0.3333")
    assert outputs_match("0.3334", "0.3333", 1e-3) and not outputs_match("0.34", "0.3333", 1e-3)
    assert outputs_match("1000001", "1000000", 1e-6)           # relative for large values
    assert not outputs_match("nan", "1.0", 1e-3) and not outputs_match("yes", "YES")
    assert normalize_input("  3 \r\n1 2  \n\n") == "  3\n1 2\n" and normalize_input("\n\n") == ""


def test_an_infinite_number_matches_only_itself_under_a_tolerance():
    """A reference that prints `inf` (no path, no bound) is matched by `inf` alone, as
    testlib's doubleCompare does. Fault: the relative bound `tolerance * |inf|` is inf, so
    any number (`0`, `-inf`) matched an expected `inf`: a wrong program passed."""
    assert outputs_match("inf", "inf", 1e-6) and outputs_match("-inf 1", "-inf 1.0000001", 1e-6)
    assert not outputs_match("0", "inf", 1e-6) and not outputs_match("1e308", "inf", 1e-6)
    assert not outputs_match("-inf", "inf", 1e-6) and not outputs_match("inf", "-inf", 1e-6)
    assert not outputs_match("inf", "5", 1e-6)


def test_the_reader_takes_what_small_models_write_and_counts_the_rest_invalid():
    text = "\n".join([
        "Test 1:", "```input", "1 2", "```", "```output", "3", "```",
        "**Input:**", "```", "4 5", "```", "Output:", "```text", "9", "```",
        "### Test 3 input", "```", "0 0", "```", "### Test 3 output", "```", "0", "```",
        "```json", json.dumps([{"input": "7 7", "output": "14"}, {"input": 3, "output": "x"}]), "```",
        "```output", "5", "```",                # an output without its input
        "```stdin", "1 1", "```",               # an input without its output (another input follows)
        "```in", "2 2", "```", "```out", "4", "```",
        "```python", "print('not a test')", "```",
        "```input", "8 8",                      # unclosed
    ])
    tests = parse_io_tests(text)
    got = [(t.input, t.output) if t.input is not None else t.reason for t in tests]
    assert got == [("1 2\n", "3\n"), ("4 5\n", "9\n"), ("0 0\n", "0\n"), ("7 7\n", "14"),
                   "json test 1 lacks string `input` and `output`", "an output without its input",
                   "an input without its output", ("2 2\n", "4\n"), "an unclosed input block"]
    assert parse_io_tests("assert f(1) == 2") == []


def test_the_comparison_at_its_edges():
    """What `benchmarks/mutation_score.py --only stdin_io` found untested: extra output
    fails as missing output does; equal words of several letters match (`is` matched single
    characters only); outputs longer than 256 tokens compare by value; under a tolerance a
    number below 1 is compared absolutely (not relative to itself) and the bound is the
    tolerance, not twice it."""
    assert not outputs_match("1 2 3", "1 2") and not outputs_match("4\n4\n", "4")
    assert outputs_match("hello world\n", "hello  world") and outputs_match("hello world", "hello world", 1e-6)
    many = " ".join(str(i) for i in range(300))
    assert outputs_match(many, many) and not outputs_match(many + " 300", many)
    assert outputs_match("0.0000011", "0.000001", 1e-6)       # |d| = 1e-7 <= 1e-6 x max(1, 1e-6)
    assert not outputs_match("0.5000015", "0.5", 1e-6)        # 1.5e-6 > 1e-6 x max(1, 0.5)
    assert outputs_match("2000001.5", "2000000", 1e-6)       # 1.5 <= 1e-6 x 2e6
    assert not outputs_match("yes", "no", 1e-6) and outputs_match("yes 1.0", "yes 1", 1e-6)   # words stay exact
    assert outputs_match("Infinity", "inf", 1e-6) and outputs_match("1e400", "inf", 1e-6)   # one infinity, spelt


def test_the_problem_s_own_limits_and_checker():
    """`meta.time_limit_s` and `meta.float_tolerance` count when they are positive numbers
    (not 0, a negative, a bool or a string); `meta.checker` when it is a program, not blank."""
    from codea1.data.stdin_io import checker_of, time_limit_of, tolerance_of

    for value, limit, tolerance in ((0.5, 0.5, 0.5), (2, 2.0, 2.0), (0, 4.0, None), (-1, 4.0, None),
                                    (0.0, 4.0, None), (True, 4.0, None), ("2", 4.0, None), (None, 4.0, None)):
        problem = Problem(id="S/x", question="q", entry_point="", reference="print(1)", kind="stdin",
                          meta={"time_limit_s": value, "float_tolerance": value})
        assert time_limit_of(problem, 4.0) == limit and tolerance_of(problem) == tolerance, value
    for checker, expected in (("print(1)\n", "print(1)\n"), ("  \n", None), (3, None), (None, None)):
        problem = Problem(id="S/x", question="q", entry_point="", reference="print(1)", kind="stdin",
                          meta={"checker": checker})
        assert checker_of(problem) == expected, checker


def test_the_reader_at_its_edges():
    """A fence on the first line is read; a blank line inside a block stays in it (only a
    fence line closes one); each unpaired input is reported with its own fence's text,
    before a json block and at the end; an output cut off by the end is one test with its
    input; a test's source is its two blocks as written."""
    tests = parse_io_tests("```input\n1\n\n2\n```\n```output\n3\n```")
    assert [(t.input, t.output, t.source) for t in tests] == [
        ("1\n\n2\n", "3\n", "```input\n1\n\n2\n```\n```output\n3\n```")]
    text = "\n".join(["```input", "5", "```", "```json", json.dumps({"input": "1", "output": "2"}), "```",
                      "```input", "6", "```", "```output", "7"])
    got = [(t.source, t.input, t.reason) for t in parse_io_tests(text)]
    assert got == [("```input\n5\n```", None, "an input without its output"),
                   (json.dumps({"input": "1", "output": "2"}), "1\n", None),
                   ("```input\n6\n```\n```output\n7", None, "an unclosed output block")]  # one test cut off
    assert [(t.source, t.reason) for t in parse_io_tests("x\n```input\n9\n```\n")] == [
        ("```input\n9\n```", "an input without its output")]
    items = [{"input": 1, "output": "x"}, {"stdin": "é", "expected_output": "ü"}]   # a bad one does not end the list
    got = [(t.source, t.input, t.output, t.reason) for t in parse_io_tests("```json\n" + json.dumps(items) + "\n```")]
    assert got == [('{"input": 1, "output": "x"}', None, None, "json test 0 lacks string `input` and `output`"),
                   ('{"stdin": "é", "expected_output": "ü"}', "é\n", "ü", None)]
    got = [(t.source, t.input, t.reason) for t in parse_io_tests(
        "```json\n[3, {\"input\": \"1\", \"output\": \"2\"}]\n```\n```json\n[{\"input\": \n```\n"
        "```input\n4\n```\n```input\n5\n```\n```output\n6\n```")]
    assert got == [("3", None, "json test 0 is not an object"), ('{"input": "1", "output": "2"}', "1\n", None),
                   ('```json\n[{"input": \n```', None,
                    "a json block that does not parse (Expecting value)"),
                   ("```input\n4\n```", None, "an input without its output"),
                   ("```input\n5\n```\n```output\n6\n```", "5\n", None)]
    long = "```input\n" + "1\n" * 300                          # unclosed after 300 lines
    assert [t.reason for t in parse_io_tests(long)] == ["an unclosed input block"]


def test_sandbox_runs_read_every_stdin_idiom_and_keep_inputs_apart(ex):
    """input(), sys.stdin, sys.stdin.buffer, open(0) and sys.exit(0) behave as under a
    judge; a global set by one input's run is not seen by the next (a fork each)."""
    programs = {
        "input": "print(int(input()) + 1)",
        "lines": "import sys\nprint(sum(int(x) for x in sys.stdin) + 1)",
        "buffer": "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())) + 1)",
        "open0": "print(sum(map(int, open(0).read().split())) + 1)",
        "exit0": "import sys\nprint(int(input()) + 1)\nsys.exit(0)",
    }
    for name, source in programs.items():
        run = ex.run(stdin_job(source, ["41\n", "1\n"], Limits(call_timeout_s=2)))
        assert [o.stdout for o in program_outputs(run, 2)] == ["42\n", "2\n"], name
    leak = "import builtins\nprint(getattr(builtins, 'seen', 'fresh'))\nbuiltins.seen = 'leaked'"
    run = ex.run(stdin_job(leak, ["", ""], Limits(call_timeout_s=2)))
    assert [o.stdout for o in program_outputs(run, 2)] == ["fresh\n", "fresh\n"]
    run = ex.run(stdin_job("import sys\nsys.exit(3)", [""], Limits(call_timeout_s=2)))
    assert program_outputs(run, 1)[0].status == "error"


def test_a_program_that_leaves_its_work_to_a_thread_is_waited_for(ex):
    """The contest idiom `threading.Thread(target=main).start()` (for a bigger stack) with
    no join: Python waits for the threads that are not daemons before it exits, so what
    they print is the program's output; a daemon thread is cut off, as at Python's exit.
    Fault: the run's output was read as soon as the main thread ended: "" on every input."""
    main = "import threading, time\ndef main():\n    time.sleep(0.2)\n    print(2 * int(input()))\n"
    for source, expected in [(main + "threading.Thread(target=main).start()\n", "42\n"),
                             (main + "threading.Thread(target=lambda: threading.Thread(target=main).start()).start()\n",
                              "42\n"),
                             (main + "threading.Thread(target=main, daemon=True).start()\n", "")]:
        run = ex.run(stdin_job(source, ["21\n"], Limits(call_timeout_s=2)))
        [out] = program_outputs(run, 1)
        assert (out.status, out.stdout) == ("ok", expected), source


def test_a_file_the_program_opened_on_standard_output_is_flushed_at_its_end(ex):
    """A program that prints through its own file on descriptor 1 (`open(1, "w")`,
    `os.fdopen(1, "w")`) and never flushes it: Python flushes it at exit, when it clears
    the program's globals. Fault: the harness read the output with the file still
    unflushed (a function at module level keeps the globals alive): "" printed."""
    main = "def main():\n    print(2 * int(input()), file=f)\nmain()\n"
    for source in ("f = open(1, 'w')\n" + main, "import os\nf = os.fdopen(1, 'w')\n" + main):
        run = ex.run(stdin_job(source, ["21\n"], Limits(call_timeout_s=2)))
        [out] = program_outputs(run, 1)
        assert (out.status, out.stdout) == ("ok", "42\n"), source


def test_a_programs_recursion_headroom_is_the_plain_programs(ex, tmp_path):
    """A program has the recursion headroom of `python program.py < input`, as a function
    candidate has (tests/test_judge_one_program.py). Fault: the harness's frames counted
    against it (depths 995 to 998 failed here and passed in the plain program)."""
    rec = "def rec(n):\n    return 0 if n == 0 else 1 + rec(n - 1)\nprint(rec(int(input())))\n"
    depths = (990, 995, 998, 999)
    path = tmp_path / "p.py"
    path.write_text(rec)
    plain = [subprocess.run([sys.executable, str(path)], input=f"{n}\n", capture_output=True, text=True).returncode == 0
             for n in depths]
    run = ex.run(stdin_job(rec, [f"{n}\n" for n in depths], Limits(call_timeout_s=2)))
    assert [o.ok for o in program_outputs(run, len(depths))] == plain
    assert plain[0] and not plain[-1]


def test_limits_fail_the_input_alone(ex):
    """Time, output and memory caps fail the input that hit them, not the others. (An
    allocation past the cap that fails at once: one the cgroup must kill can take longer
    than the time limit on a loaded machine, and then reads as a time-out.)"""
    source = ("n = int(input())\n"
              "if n == 1:\n    while True: pass\n"
              "if n == 2:\n    print('x' * 5_000_000)\n"
              "if n == 3:\n    b = bytearray(2 ** 62)\n"
              "print(n)")
    run = ex.run(stdin_job(source, ["1\n", "2\n", "3\n", "4\n"], Limits(call_timeout_s=2.5, memory_mb=256)))
    out = program_outputs(run, 4)
    assert [o.status for o in out] == ["timeout", "output-limit", "memory", "ok"]
    assert out[3].stdout == "4\n"


SECRET = "31337424242"


def test_red_team_a_candidate_cannot_find_or_forge_expected_outputs(ex):
    """Expected outputs never enter a candidate's sandbox: a candidate that searches its
    memory, its files and the other tests' inputs for them, writes an answer file for later
    runs and prints another test's expected output fails every test it does not solve.
    Tried: putting the reference's outputs into the candidate's program (as a comparison in
    the sandbox would): the scanning candidate passed and the test failed."""
    reference = "n = int(input())\nprint(31337424242 if n == 7 else n)\n"
    attacker = "\n".join([
        "import gc, os, sys",
        "found = set()",
        "for obj in gc.get_objects():",
        "    for v in (obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()):",
        "        if isinstance(v, str) and v.strip().isdigit() and len(v.strip()) > 8:",
        "            found.add(v.strip())",
        "for root in ('.', '/tmp', os.path.expanduser('~')):",
        "    try:",
        "        for name in os.listdir(root):",
        "            try:",
        "                found.update(w for w in open(os.path.join(root, name)).read().split() if w.isdigit() and len(w) > 8)",
        "            except Exception:",
        "                pass",
        "    except Exception:",
        "        pass",
        "try:",
        "    open('answer.txt', 'a').write('99999999999\\n')",   # for a later run to find
        "except Exception:",
        "    pass",
        "print(sorted(found)[0] if found else 1)",
    ])
    suite = "```input\n7\n```\n```output\n31337424242\n```\n```input\n5\n```\n```output\n5\n```"
    judge = Judge(ex, JudgeConfig(suite_size=2))
    copier = "```python\nprint(5)\n```"     # prints test 2's expected output on every input
    [r] = judge.judge_step([ProblemRollout(_problem(reference), [f"```python\n{attacker}\n```", copier],
                                           [[suite], [suite]])])
    scan = r.suites[0][0].tests[0]
    assert scan.passed is False, scan.failure
    assert r.suites[1][0].tests[0].passed is False and r.suites[1][0].tests[1].passed is True
    assert r.code_rewards[1] == 0.5


def test_red_team_no_expected_output_travels_into_a_candidates_run(ex):
    """Every job a judge step submits, but the checker's, holds no expected output (written
    by the test model or printed by the reference); the checker runs apart from candidates.
    Tried: the reference's outputs in the candidate's program: this test failed."""
    jobs = []
    spy = _Spy(ex, jobs)
    reference = "print(int(input()) * 1000003)\n"
    suite = "```input\n11\n```\n```output\n11000033\n```\n```input\n12\n```\n```output\n99999989\n```"
    judge = Judge(spy, JudgeConfig(suite_size=2))
    [r] = judge.judge_step([ProblemRollout(_problem(reference), ["```python\nprint(1)\n```"], [[suite]])])
    assert r.usable and len(jobs) == 2
    for job in jobs:
        text = job.program + "".join(job.calls)
        assert "11000033" not in text and "99999989" not in text and "12000036" not in text


def test_red_team_writing_to_the_judges_files_changes_nothing(ex, tmp_path):
    """A candidate that tries to overwrite the judge's files (the problem file, the Mistake
    Book, anything it can name) neither changes them nor changes its verdict."""
    book = tmp_path / "mistakes.sqlite"
    book.write_text("the book")
    target = tmp_path / "problems.jsonl"
    target.write_text("the problems")
    vandal = "\n".join([
        "import os",
        f"for path in ({str(book)!r}, {str(target)!r}, '/tmp/codea1-judge'):",
        "    try:",
        "        open(path, 'w').write('4')",
        "    except Exception:",
        "        pass",
        "print(1)",
    ])
    judge = Judge(ex, JudgeConfig(suite_size=1))
    [r] = judge.judge_step([ProblemRollout(_problem(DOUBLE), [f"```python\n{vandal}\n```"],
                                           [["```input\n2\n```\n```output\n4\n```"]])])
    assert r.code_rewards == [0.0]
    assert book.read_text() == "the book" and target.read_text() == "the problems"


def test_golden_verdicts_and_an_unrunnable_reference(ex):
    problem = _problem(DOUBLE, tests=[("2\n", "4\n"), ("-3\n", "-6\n")])
    judge = Judge(ex, JudgeConfig())
    right, wrong = judge.evaluate_golden_many([(problem, RIGHT), (problem, PLUS_TWO)])
    assert right.passed and not wrong.passed and "golden test 1" in wrong.detail
    [r] = judge.judge_step([ProblemRollout(_problem("print(("), [RIGHT], [["```input\n1\n```\n```output\n2\n```"]])])
    assert not r.usable and "reference solution does not run" in r.reference_error
    assert r.mistake_update().failed == {}


def test_a_program_that_hangs_on_every_input_costs_one_budget(ex):
    """As for functions, a candidate program has one budget (`limits.timeout_s`, plus one
    input's limit): 12 inputs at 0.5 s each would take 6 s; with a 1 s budget the run ends
    after about 1.5 s and every test fails (timed out, or not run). `per_call_timeouts`
    gives every input its own limit. Tried: a budget covering every input: the run took
    over 6 s and this failed."""
    import time

    suite = "\n".join(f"```input\n{n}\n```\n```output\n{2 * n}\n```" for n in range(12))
    hang = "```python\nwhile True:\n    pass\n```"
    judge = Judge(ex, JudgeConfig(suite_size=12, limits=Limits(timeout_s=1.0, call_timeout_s=3.0)))
    start = time.perf_counter()
    [r] = judge.judge_step([ProblemRollout(_problem(DOUBLE), [hang], [[suite]])])
    assert time.perf_counter() - start < 4.5
    outcomes = r.suites[0][0].tests
    assert r.code_valid == [True] and r.code_rewards == [0.0] and len(outcomes) == 12
    assert all(t.passed is False for t in outcomes)
    assert {t.failure.split(":")[0] for t in outcomes} <= {"timeout", "not-run"}
    assert r.suites[0][0].gen_fail_rate == 1.0


def test_infra_failures_of_stdin_problems_are_unusable_and_name_their_tests():
    """What the Ray backend reports for a batch whose actor died: unusable judgements, the
    stdin suites read by the stdin reader (no executor needed). Tried: without the
    dispatch, the function-level reader found no test in the suite (0 outcomes)."""
    judge = Judge(None, JudgeConfig())
    [r] = judge.infra_failures([ProblemRollout(_problem(DOUBLE), [RIGHT], [[SUITE]])], "node lost")
    assert not r.usable and r.infra_error == "infra: node lost" and r.code_rewards == [0.0]
    assert len(r.suites[0][0].tests) == 7 and r.mistake_update().failed == {}


def test_the_reference_runs_under_the_reference_limits_memory(ex):
    """`JudgeConfig.reference_limits` sets the reference's memory as for functions, where a
    reference that needs more than a candidate is given it. Tried: the candidate's limits
    for the reference run (as before): this test failed."""
    jobs = []
    spy = _Spy(ex, jobs)
    config = JudgeConfig(suite_size=1, limits=Limits(memory_mb=512),
                         reference_limits=Limits(timeout_s=60.0, memory_mb=1536))
    suite = "```input\n2\n```\n```output\n4\n```"
    [r] = Judge(spy, config).judge_step([ProblemRollout(_problem(DOUBLE), [PLUS_TWO], [[suite]])])
    assert r.usable and r.test_rewards[0][0] > 0
    memory = {("reference" if DOUBLE.strip() in job.program else "candidate"): job.limits.memory_mb for job in jobs}
    assert memory == {"reference": 1536, "candidate": 512}


def test_an_exit_is_a_failure_exactly_when_plain_python_exits_non_zero(ex, tmp_path):
    """`sys.exit(X)` after the answer: the run is ok where `python program.py` exits 0
    (None, 0, False) and a failure where it exits non-zero, which the real interpreter
    decides here (0.0 and "" are not 0 to it, 256 is). Tried: `code != 0` (as before): 0.0 was ok."""
    for code in ["None", "0", "False", "0.0", "''", "'bye'", "3", "True", "[]", "256", "-256", "2 ** 64",
                 "type('C', (int,), {'__eq__': lambda s, o: True})(5)"]:
        source = f"import sys\nprint(1)\nsys.exit({code})\n"
        (tmp_path / "p.py").write_text(source)
        plain = subprocess.run([sys.executable, str(tmp_path / "p.py")], capture_output=True).returncode
        [out] = program_outputs(ex.run(stdin_job(source, [""], Limits(call_timeout_s=2))), 1)
        assert out.ok == (plain == 0), (code, plain, out.status)


def test_the_output_cap_is_a_judge_key_and_its_default_holds_a_contest_output(ex):
    """Printing 0..199999 a line each (1.29 MB, a usual contest output) passed no test
    under the old fixed 1 MiB cap: the reference's run was `output-limit`, so every test
    was invalid. The default is 4 MiB; `judge.stdin_max_output_mb` sets it (a smaller cap
    makes the same run output-limit again), as `judge.stdin_time_scale` sets the time."""
    count = "n = int(input())\nprint('\\n'.join(map(str, range(n))))\n"
    problem = Problem(id="S/count", question="Print 0..n-1.", entry_point="", reference=count, kind="stdin",
                      meta={"time_limit_s": 5.0})
    expected = "".join(f"{i}\n" for i in range(200000))
    suite = f"```input\n200000\n```\n```output\n{expected}```"
    code = f"```python\n{count}```"
    [r] = Judge(ex, JudgeConfig(suite_size=1)).judge_step([ProblemRollout(problem, [code], [[suite]])])
    assert r.suites[0][0].valid == 1 and r.code_rewards == [1.0]
    [r] = Judge(ex, JudgeConfig(suite_size=1, stdin_max_output_mb=1.0)).judge_step(
        [ProblemRollout(problem, [code], [[suite]])])
    assert r.suites[0][0].valid == 0   # the reference's run is past the cap: its test is invalid
