"""Run a command-line tool's `main` inside the test's process, as `python -m` runs it in a fresh one, so that a test of
the tool's answers and errors does not pay an interpreter start, torch's import and the data load per call (about 2 s
each). Each tool keeps tests that start the real process (a pipe on standard input, a full disk on standard output, a
bad cache migration, its exit status)."""
import contextlib
import io
import subprocess
import sys
import warnings

from lib import paths

# What a fresh interpreter starts with (Python's documented default warning filters), first match first
FRESH_FILTERS = (("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                 ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""),
                 ("ignore", ResourceWarning, ""))


def _to_stderr(message, category, filename, lineno, file=None, line=None):
    """warnings.showwarning as a fresh interpreter has it: the warning on (the captured) standard error."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_main(main, prog: str, *args) -> subprocess.CompletedProcess:
    """`prog args` as main(args) from the repository root: exit status (argparse's exits included), stdout, stderr."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.chdir(paths.ROOT), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.resetwarnings()   # pytest's own filters and recorder out; a fresh process's back
        for action, category, module in reversed(FRESH_FILTERS):
            warnings.filterwarnings(action, category=category, module=module)
        warnings.showwarning = _to_stderr
        try:
            code = main(argv)
        except SystemExit as e:   # argparse: --help, a bad argument
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    return subprocess.CompletedProcess([prog, *argv], code, out.getvalue(), err.getvalue())


def run_module(module: str, *args) -> subprocess.CompletedProcess:
    """`python -m module args` in its own process from the repository root: the entry point as users run it."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          cwd=paths.ROOT, timeout=900)   # a guard against hangs, not a speed test
