"""What of the host a run sees: the view builder over several interpreter layouts (pure,
on fake trees), and the canary check of ``codea1 sandbox check`` (real runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from codea1.sandbox import isolation
from codea1.sandbox.isolation import find_checkout, places_to_hide, plan_view


def make_tree(root, files=(), links=None, dirs=()):
    """Files (each holding its own name), empty dirs and symlinks (path -> target) under root."""
    for rel in dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    for rel, target in (links or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)


def pyenv_interpreter(root, base_rel):
    """An interpreter like pyenv's (or a source build): bin/python3 -> python3.11, lib/."""
    make_tree(root, files=[f"{base_rel}/bin/python3.11", f"{base_rel}/bin/pip3",
                           f"{base_rel}/lib/python3.11/os.py", f"{base_rel}/lib/python3.11/lib-dynload/_ssl.so",
                           f"{base_rel}/lib/libpython3.11.so", f"{base_rel}/include/python3.11/Python.h"],
              links={f"{base_rel}/bin/python3": "python3.11"})
    base = str(root / base_rel)
    return base, [f"{base}/lib/python311.zip", f"{base}/lib/python3.11", f"{base}/lib/python3.11/lib-dynload"]


def make_venv(root, venv_rel, base):
    """A venv as `python -m venv` makes it: symlinked interpreter, pyvenv.cfg, scripts."""
    make_tree(root, files=[f"{venv_rel}/pyvenv.cfg", f"{venv_rel}/bin/activate", f"{venv_rel}/bin/codea1",
                           f"{venv_rel}/lib/python3.11/site-packages/numpy/__init__.py",
                           f"{venv_rel}/include/site/x.h"],
              links={f"{venv_rel}/bin/python": "python3", f"{venv_rel}/bin/python3": f"{base}/bin/python3",
                     f"{venv_rel}/lib64": "lib"})
    venv = str(root / venv_rel)
    return venv, f"{venv}/lib/python3.11/site-packages"


def system_dir(root):
    make_tree(root, files=["usr/lib/libc.so.6", "usr/bin/sh"], links={"lib": "usr/lib"})
    return (str(root / "usr"), str(root / "lib"))


def checkout(root, rel):
    make_tree(root, files=[f"{rel}/README.md", f"{rel}/codea1/__init__.py", f"{rel}/tests/test_x.py"],
              dirs=[f"{rel}/.git"])
    return str(root / rel)


def test_venv_inside_the_checkout_shows_only_its_site_packages(tmp_path):
    """The README's layout: `.venv` in the repo, PYTHONPATH=<checkout>, interpreter in home."""
    r = tmp_path
    home = str(r / "home/u")
    base, stdlib = pyenv_interpreter(r, "home/u/.pyenv/versions/3.11.7")
    co = checkout(r, "src/co")
    venv, site = make_venv(r, "src/co/.venv", base)
    make_tree(r, files=["home/u/.ssh/id_ed25519", "tmp/other.txt"])
    view = plan_view(base, venv, f"{venv}/bin/python", [co, *stdlib, site, "__editable__.finder.__path_hook__"],
                     [co, co, home, str(r / "tmp")], system_dirs=system_dir(r))
    for p in (f"{site}/numpy/__init__.py", f"{base}/lib/python3.11/os.py", f"{base}/lib/libpython3.11.so",
              f"{base}/lib/python3.11/lib-dynload/_ssl.so", f"{base}/bin/python3.11", f"{venv}/pyvenv.cfg",
              str(r / "usr/lib/libc.so.6")):
        assert view.shows(p), p
    for p in (f"{co}/README.md", f"{co}/.git", f"{co}/codea1/__init__.py", f"{co}/tests/test_x.py",
              f"{venv}/bin/activate", f"{venv}/bin/codea1", f"{venv}/include/site/x.h", f"{base}/bin/pip3",
              f"{base}/include/python3.11/Python.h", f"{home}/.ssh/id_ed25519", str(r / "tmp/other.txt")):
        assert not view.shows(p), p
    # Only what is needed is bound: nothing that holds the checkout or the home directory.
    assert not any(isolation._within(co, b) or isolation._within(home, b) for b in view.binds), view.binds
    assert site in view.binds and view.masks == () and view.unhideable == ()
    # sys.executable and /lib resolve in the view as on the host.
    links = dict(view.links)
    assert links[f"{venv}/bin/python"] == "python3" and links[f"{venv}/bin/python3"] == f"{base}/bin/python3"
    assert links[f"{base}/bin/python3"] == "python3.11" and links[str(r / "lib")] == "usr/lib"


def test_venv_in_home_and_an_editable_checkout_elsewhere(tmp_path):
    r = tmp_path
    usr = str(r / "usr")
    make_tree(r, files=["usr/bin/python3.11", "usr/lib/python3.11/os.py", "usr/lib/python3/dist-packages/apt.py"])
    home = str(r / "home/u")
    venv, site = make_venv(r, "home/u/venvs/codea1", f"{usr}")
    co = checkout(r, "work/co")
    make_tree(r, files=["home/u/notes.txt", "work/other/secret.txt"])
    cwd = str(r / "work/co/tests")
    view = plan_view(usr, venv, f"{venv}/bin/python", [f"{usr}/lib/python3.11", site, co],
                     [co, cwd, home, str(r / "tmp")], system_dirs=(usr,))
    assert view.shows(f"{site}/numpy/__init__.py") and view.shows(f"{usr}/lib/python3.11/os.py")
    assert view.shows(f"{venv}/pyvenv.cfg")
    for p in (f"{co}/README.md", f"{cwd}/test_x.py", f"{home}/notes.txt", f"{venv}/bin/activate",
              str(r / "work/other/secret.txt")):
        assert not view.shows(p), p
    assert sorted(view.binds) == sorted([usr, site, f"{venv}/pyvenv.cfg"])


def test_system_python_with_the_checkout_inside_a_system_dir_is_masked(tmp_path):
    """A bind that holds a hidden directory covers it; a package dir inside is bound again."""
    r = tmp_path
    usr = str(r / "usr")
    make_tree(r, files=["usr/bin/python3.11", "usr/lib/python3.11/os.py", "usr/lib/python3/dist-packages/apt.py",
                        "usr/local/lib/python3.11/dist-packages/requests.py"])
    co = checkout(r, "usr/src/co")
    venv, site = make_venv(r, "usr/src/co/.venv", usr)
    view = plan_view(usr, usr, f"{usr}/bin/python3.11",
                     [f"{usr}/lib/python3.11", f"{usr}/lib/python3/dist-packages",
                      f"{usr}/local/lib/python3.11/dist-packages", co],
                     [co, co, str(r / "root"), str(r / "tmp")], system_dirs=(usr,))
    assert view.binds == (usr,) and view.masks == (co,)
    assert view.shows(f"{usr}/lib/python3/dist-packages/apt.py") and view.shows(f"{usr}/bin/python3.11")
    assert not view.shows(f"{co}/README.md") and not view.shows(f"{venv}/bin/activate")
    # The same checkout as a venv's home: its site-packages is bound again inside the mask.
    view = plan_view(usr, venv, f"{venv}/bin/python", [f"{usr}/lib/python3.11", site, co],
                     [co, co, str(r / "tmp")], system_dirs=(usr,))
    assert view.masks == (co,) and site in view.binds
    assert view.shows(f"{site}/numpy/__init__.py") and view.shows(f"{venv}/pyvenv.cfg")
    assert not view.shows(f"{co}/README.md") and not view.shows(f"{venv}/bin/activate")
    order = [path for _, path in view.mounts()]
    assert order.index(usr) < order.index(co) < order.index(site)  # outer before inner


def test_conda_layout_shows_its_lib_not_its_other_envs_or_package_cache(tmp_path):
    r = tmp_path
    make_tree(r, files=["opt/conda/bin/python3.11", "opt/conda/bin/conda", "opt/conda/lib/libssl.so.3",
                        "opt/conda/lib/python3.11/os.py", "opt/conda/lib/python3.11/site-packages/numpy/__init__.py",
                        "opt/conda/pkgs/numpy-2.0.tar.bz2", "opt/conda/envs/work/bin/python3.11",
                        "opt/conda/envs/work/lib/python3.11/os.py", "opt/conda/envs/work/lib/libssl.so.3",
                        "opt/conda/envs/other/lib/python3.11/site-packages/secret.py"],
              links={"opt/conda/bin/python": "python3.11"})
    base = str(r / "opt/conda")
    site = f"{base}/lib/python3.11/site-packages"
    view = plan_view(base, base, f"{base}/bin/python", [f"{base}/lib/python3.11", site],
                     [str(r / "home/u"), str(r / "tmp")], system_dirs=())
    assert view.shows(f"{base}/lib/libssl.so.3") and view.shows(f"{site}/numpy/__init__.py")
    assert view.shows(f"{base}/bin/python3.11") and dict(view.links)[f"{base}/bin/python"] == "python3.11"
    for p in (f"{base}/bin/conda", f"{base}/pkgs/numpy-2.0.tar.bz2", f"{base}/envs/other/lib/python3.11"):
        assert not view.shows(p), p
    env = f"{base}/envs/work"  # a conda env is its own prefix (no pyvenv.cfg)
    view = plan_view(env, env, f"{env}/bin/python3.11", [f"{env}/lib/python3.11"], [], system_dirs=())
    assert view.shows(f"{env}/lib/libssl.so.3") and not view.shows(f"{base}/lib/libssl.so.3")
    assert not view.shows(f"{base}/envs/other/lib/python3.11/site-packages/secret.py")


def test_a_hidden_dir_the_run_needs_stays_visible_and_is_reported(tmp_path):
    """Run from inside site-packages: hiding it would break imports, so the view says so
    (and the canary check then fails for the current directory)."""
    r = tmp_path
    base, stdlib = pyenv_interpreter(r, "py")
    venv, site = make_venv(r, "venv", base)
    view = plan_view(base, venv, f"{venv}/bin/python", [*stdlib, site], [site], system_dirs=())
    assert view.unhideable == (site,) and view.shows(f"{site}/.codea1-canary-x")


def test_places_to_hide_find_the_checkout_of_the_package(tmp_path):
    co = checkout(tmp_path, "co")
    make_tree(tmp_path, dirs=["co/.venv/lib/python3.11/site-packages/codea1", "elsewhere/lib/site-packages"])
    kinds = dict((what, path) for what, path in reversed(places_to_hide(co, cwd=str(tmp_path))))
    assert kinds["checkout"] == co and kinds["current directory"] == str(tmp_path)
    assert kinds["home directory"] == os.path.realpath(os.path.expanduser("~")) and kinds["/tmp"] == "/tmp"
    # Installed (not editable) into a venv inside the checkout: the checkout is still found.
    assert find_checkout(f"{co}/.venv/lib/python3.11/site-packages") == co
    # Installed into a venv outside any checkout: no checkout, and site-packages is not hidden.
    outside = str(tmp_path / "elsewhere/lib/site-packages")
    assert find_checkout(outside) is None or not find_checkout(outside).startswith(str(tmp_path))
    assert not any(what in ("checkout", "package root") and path == outside
                   for what, path in places_to_hide(outside, cwd=co))


# ------------------------------------------------------------------ canaries (real runs)

pytestmark_linux = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/self"),
                                      reason="the sandbox needs Linux (fork, /proc)")


@pytestmark_linux
def test_canaries_are_hidden_by_the_sandbox_and_removed_afterwards(tmp_path):
    from codea1.sandbox import Executor
    from codea1.sandbox.selfcheck import check_canaries

    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    with Executor(workers=1, preload=()) as ex:
        if ex.protections.get("read-only-root") is not True:
            pytest.skip(f"no read-only root here: {ex.protections.get('read-only-root')}")
        got = check_canaries(ex, [("a", str(dirs[0])), ("b", str(dirs[1])), ("missing", str(tmp_path / "no/such"))])
    assert [c.place for c in got] == ["a", "b", "missing"]
    assert [(c.visible, c.problem) for c in got[:2]] == [(False, None), (False, None)]
    assert got[2].problem.startswith("cannot plant a canary here") and not got[2].visible
    assert all(os.listdir(d) == [] for d in dirs)


@pytestmark_linux
def test_canaries_fail_when_runs_can_see_the_host(tmp_path):
    """Without isolation a run sees the host's files: every canary must say so."""
    from codea1.sandbox import Executor
    from codea1.sandbox.selfcheck import check_canaries

    d = tmp_path / "visible"
    d.mkdir()
    with Executor(workers=1, preload=(), isolate=False) as ex:
        got = check_canaries(ex, [("checkout", str(d))])
    # ("denied" where a directory above is private to root: the run still finds the host's tree)
    assert got[0].problem is None and got[0].visible and set(got[0].seen) & {"stat", "listed", "denied"}
    assert os.listdir(d) == []


@pytestmark_linux
@pytest.mark.skipif(os.geteuid() != 0, reason="the view needs root (mount namespace)")
def test_cli_check_fails_loudly_naming_each_visible_canary(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import codea1.sandbox as sandbox
    import codea1.sandbox.selfcheck as selfcheck
    from codea1.sandbox.cli import app

    places = [("checkout", str(tmp_path / "co")), ("/tmp", str(tmp_path / "t"))]
    for _, p in places:
        os.mkdir(p)
    unsafe = sandbox.Executor
    monkeypatch.setattr(sandbox, "Executor", lambda **kw: unsafe(isolate=False, **kw))
    monkeypatch.setattr(selfcheck, "canary_places", lambda package_root=None: places)
    monkeypatch.setattr(selfcheck, "run_checks", lambda ex: [])  # (the attacks: see test_sandbox.py)
    res = CliRunner().invoke(app, ["check"], terminal_width=200)
    assert res.exit_code == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: sandboxed code can see ")]
    assert len(lines) == 2 and [p for _, p in places] == [ln.split()[5].rsplit("/", 1)[0] for ln in lines]
    assert all(os.listdir(p) == [] for _, p in places)


@pytestmark_linux
@pytest.mark.skipif(os.geteuid() != 0, reason="the view needs root (mount namespace)")
def test_a_venv_inside_the_checkout_is_not_a_way_into_the_checkout(tmp_path):
    """End to end, the README's layout: a checkout with `.venv` inside, PYTHONPATH=<checkout>,
    run from the checkout. The run sees the venv's packages, not the checkout."""
    co = tmp_path / "co"
    (co / ".git").mkdir(parents=True)
    (co / "README.md").write_text("readme")
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(isolation.__file__)))
    os.symlink(pkg, co / "codea1")  # this checkout's package is the one under test
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(co / ".venv")], check=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    site = next(iter((co / ".venv/lib").glob("python3*/site-packages")))
    # The venv's packages are those of the interpreter running this test.
    here = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)]
    (site / "outer.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in here) + "\n")
    script = textwrap.dedent("""
        import json, os, sys
        from codea1.sandbox import Executor, Job
        from codea1.sandbox.selfcheck import canary_places, check_canaries
        co = os.getcwd()
        with Executor(workers=1) as ex:
            places = canary_places()
            canaries = check_canaries(ex, places)
            r = ex.run(Job("import os, sys, numpy\\n", [
                f"[p for p in ({co + '/README.md'!r}, {co + '/.venv/bin/activate'!r}, {co + '/.git'!r}) if os.path.exists(p)]",
                f"sorted(os.listdir({co!r}))", f"sorted(os.listdir({co + '/.venv'!r}))",
                f"all(n.startswith('python') for n in os.listdir({co + '/.venv/bin'!r}))",
                "os.path.exists(sys.executable) and os.path.exists(numpy.__file__)"]))
        print(json.dumps({"places": places, "canaries": [[c.place, c.seen, c.problem] for c in canaries],
                          "status": r.status, "error": r.program_error,
                          "calls": [[c.status, c.value, c.error] for c in r.calls]}))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(co)
    out = subprocess.run([str(co / ".venv/bin/python"), "-c", script], cwd=co, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert ["checkout, current directory", str(co)] in got["places"], got["places"]
    assert all(seen == [] and problem is None for _, seen, problem in got["canaries"]), got["canaries"]
    assert got["status"] == "ok", got
    calls = got["calls"]
    assert calls[0] == ["ok", ["list", []], None], calls[0]
    assert calls[1] == ["ok", ["list", [["str", ".venv"]]], None], calls[1]  # only the way to site-packages
    assert calls[2] == ["ok", ["list", [["str", "bin"], ["str", "lib"], ["str", "pyvenv.cfg"]]], None], calls[2]
    assert calls[3] == ["ok", ["bool", True], None], calls[3]  # bin/ holds only the interpreter's links
    assert calls[4] == ["ok", ["bool", True], None], calls[4]
