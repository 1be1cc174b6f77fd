"""Issue 19: the command-line tool as a user runs it, through real processes (``python -m habitat_trace``), with
pipes, a pseudo-terminal (terminal width, progress, Ctrl-C) and signals. ``CliRunner`` hid that ``check`` and
Ctrl-C exited 0; these tests see the exit status the shell sees."""
from __future__ import annotations

import fcntl
import gzip
import json
import os
import pty
import re
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MLP_FIXTURE, ROOT, TRACES, needs_shared

pytestmark = pytest.mark.slow  # a process (an interpreter start) per case: ~80 s in all; CI runs them (--all)
GPT2 = TRACES / "h100-sxm" / "gpt2_b8_s1024_amp.pt.trace.json.gz"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def cli(*args: Any, env: dict[str, str] | None = None, prefix: tuple[str, ...] = (),
        **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "habitat_trace", *map(str, args)], capture_output=True,
                          text=True, env=env or _env(), timeout=300, cwd=kw.pop("cwd", ROOT), **kw)


def _doc(path: Path = MLP_FIXTURE) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _events_of(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


class Pty:
    """A child whose stdin/stderr (and stdout unless ``stdout_pipe``) is a pseudo-terminal of ``cols`` columns,
    as its controlling terminal, so writing ^C to the master sends it SIGINT like a keyboard."""

    def __init__(self, args: list[Any], cols: int = 80, stdout_pipe: bool = False, env: dict | None = None) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            default_signals()

        self.proc = subprocess.Popen([sys.executable, "-m", "habitat_trace", *map(str, args)], stdin=slave,
                                     stdout=subprocess.PIPE if stdout_pipe else slave, stderr=slave, cwd=ROOT,
                                     env=env or _env(TERM="xterm"), preexec_fn=controlling_tty, pass_fds=(slave,))
        os.close(slave)
        self.text = ""

    def read_until(self, needle: str, timeout: float = 60) -> bool:
        end = time.monotonic() + timeout
        while needle not in self.text and time.monotonic() < end:
            if not self._read(0.1):
                break
        return needle in self.text

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if ready:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return False
            if not chunk:
                return False
            self.text += chunk.decode(errors="replace")
        return True

    def finish(self, timeout: float = 120) -> int:
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self._read(0.1)
        while self._read(0.05) and time.monotonic() < end:
            pass
        code = self.proc.wait(timeout=max(end - time.monotonic(), 1))
        os.close(self.master)
        return code


def default_signals() -> None:
    """In a child about to exec: SIGINT as a shell gives a foreground command. A test run started in the
    background of a non-interactive shell ignores SIGINT, and children inherit that (Python then installs no
    KeyboardInterrupt), so every ^C test would hang."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _feed_fifo(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


# --- 1. outputs: special files, symlinks, stdout ------------------------------------------------------------

def _char_device(tmp_path: Path) -> Path:
    """A private copy of /dev/null (root can mknod); else /dev/null itself, which a non-root writer could not
    replace anyway."""
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return node
    except (PermissionError, OSError):
        return Path("/dev/null")


def test_output_character_device_is_written_into_not_replaced(tmp_path: Path) -> None:
    dev = _char_device(tmp_path)
    res = cli("scale", MLP_FIXTURE, "--to", "L4", "-o", dev)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISCHR(dev.stat().st_mode), f"{dev} was replaced by a regular file"
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_output_block_device_is_refused(tmp_path: Path) -> None:
    node = tmp_path / "disk"
    try:
        os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 0))  # a loop device node; never opened
    except (PermissionError, OSError):
        pytest.skip("cannot create a block device node (needs root)")
    res = cli("scale", MLP_FIXTURE, "--to", "L4", "-o", node)
    assert res.returncode == 5 and "block device" in res.stderr, res.stderr
    assert stat.S_ISBLK(node.stat().st_mode)


def test_output_fifo_receives_the_trace_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    res = cli("scale", MLP_FIXTURE, "--to", "L4", "-o", fifo)
    reader.join(30)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(got[0])["habitat_trace"]["target"] == "L4"


def test_output_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.pt.trace.json.gz"
    real.write_bytes(b"old")
    link = tmp_path / "link.pt.trace.json.gz"
    link.symlink_to(real.name)
    res = cli("scale", MLP_FIXTURE, "--to", "L4", "-o", link)
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and os.readlink(link) == real.name
    assert _events_of(real)["habitat_trace"]["target"] == "L4"


def test_output_dash_writes_json_to_stdout_and_the_report_to_stderr(tmp_path: Path) -> None:
    res = cli("scale", MLP_FIXTURE, "--to", "L4", "-o", "-", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["habitat_trace"]["target"] == "L4"
    assert "written:" in res.stderr and "stdout" in res.stderr
    assert not (tmp_path / "-").exists()


# --- 2. exit codes: check, Ctrl-C ------------------------------------------------------------------------------

def test_check_exits_1_on_violations(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"habitat_trace": {"input_violations": {}}, "traceEvents": [  # an output of ours
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10}]}))
    res = cli("check", bad)
    assert res.returncode == 1 and "nesting" in res.stdout and "error" in res.stdout


def test_ctrl_c_exits_130(tmp_path: Path) -> None:
    fifo = tmp_path / "in.pt.trace.json"
    os.mkfifo(fifo)  # nobody writes: the command blocks reading it, mid-run
    term = Pty(["-v", "scale", fifo, "--to", "L4", "-o", tmp_path / "out.json.gz"])
    assert term.read_until("INFO: reading"), term.text
    time.sleep(0.3)
    os.write(term.master, b"\x03")  # ^C on the terminal: SIGINT to the foreground process group
    assert term.finish() == 130, term.text
    assert "aborted" in term.text and "Traceback" not in term.text


# --- 3. unwritable directory, signals, PNG mode ---------------------------------------------------------------

def _without_root_override() -> tuple[str, ...]:
    """Root writes into a mode-555 directory anyway; drop CAP_DAC_OVERRIDE so the permission bits apply."""
    if os.geteuid() != 0:
        return ()
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot make a directory unwritable")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search")


def test_unwritable_output_directory_exits_5(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    prefix = _without_root_override()
    res = cli("scale", MLP_FIXTURE, "--to", "L4", "-o", ro / "x.json.gz", prefix=prefix)
    assert res.returncode == 5 and "not writable" in res.stderr, res.stderr
    pytest.importorskip("matplotlib")
    res = cli("compare", MLP_FIXTURE, "--to", "L4", "--plot", ro / "x.png", prefix=prefix)
    assert res.returncode == 5 and "not writable" in res.stderr, res.stderr
    assert list(ro.iterdir()) == []


@needs_shared
@pytest.mark.parametrize("how, code", [("sigterm", 143), ("ctrl-c", 130)])
def test_signal_while_writing_leaves_no_temp_file(tmp_path: Path, how: str, code: int) -> None:
    out = tmp_path / "gpt2.l4.pt.trace.json.gz"
    term = Pty(["scale", GPT2, "--to", "L4", "-o", out])
    end = time.monotonic() + 120
    while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()) and term.proc.poll() is None:
        assert time.monotonic() < end
        time.sleep(0.002)
    if how == "sigterm":
        term.proc.send_signal(signal.SIGTERM)
    else:
        os.write(term.master, b"\x03")
    assert term.finish() == code, term.text
    left = list(tmp_path.iterdir())
    assert not any(p.name.endswith(".tmp") for p in left), "a temp file was left"
    # the signal can land after the rename: then the output is whole, never partial
    assert left == [] or (left == [out] and json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]), \
        "a partial output was left"


def test_plot_png_has_the_mode_of_the_traces(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "c.png"
    res = cli("compare", MLP_FIXTURE, "--to", "L4,T4", "--plot", png, "--format", "json",
              prefix=("sh", "-c", 'umask 022; exec "$@"', "sh"))
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(png.stat().st_mode) == 0o644
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- 4. validate: other GPU, other program --------------------------------------------------------------------

def test_validate_warns_when_the_prediction_is_for_another_gpu(tmp_path: Path) -> None:
    pred = tmp_path / "mlp.l4.json.gz"
    assert cli("scale", MLP_FIXTURE, "--to", "L4", "-o", pred).returncode == 0
    res = cli("validate", pred, MLP_FIXTURE, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "predicts L4 but" in res.stderr and "H100" in res.stderr
    assert json.loads(res.stdout)["warnings"]


def test_validate_refuses_traces_of_different_programs(tmp_path: Path) -> None:
    doc = _doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["name"] = "other::" + e["name"]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    res = cli("validate", MLP_FIXTURE, other)
    assert res.returncode == 1 and "run different programs" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


# --- 5. --to lists and all, --top, validate's keys ------------------------------------------------------------

def test_to_takes_comma_lists_and_all_in_scale_explain_and_compare(tmp_path: Path) -> None:
    res = cli("scale", MLP_FIXTURE, "--to", "L4,T4", "-o", tmp_path)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp_b32_fp32.l4.pt.trace.json.gz",
                                                          "mlp_b32_fp32.t4.pt.trace.json.gz"]
    res = cli("explain", MLP_FIXTURE, "--to", "L4,T4", "--format", "json", "--top", 2)
    assert res.returncode == 0, res.stderr
    assert [e["target"] for e in json.loads(res.stdout)["steps"]] == ["L4", "T4"]
    gpus = [g["name"] for g in json.loads(cli("gpus", "--format", "json").stdout)]
    res = cli("compare", MLP_FIXTURE, "--to", "all", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert {r["gpu"] for r in json.loads(res.stdout)} == set(gpus)


@pytest.mark.parametrize("command", ["inspect", "explain", "validate"])
def test_top_below_one_is_a_usage_error(command: str) -> None:
    args = {"inspect": [MLP_FIXTURE], "explain": [MLP_FIXTURE, "--to", "L4"],
            "validate": [MLP_FIXTURE, MLP_FIXTURE]}[command]
    res = cli(command, *args, "--top", "-3")
    assert res.returncode == 2 and "--top" in res.stderr and "greater than or equal to 1" in res.stderr, res.stderr


def test_validate_json_keys_say_their_units(tmp_path: Path) -> None:
    res = cli("validate", MLP_FIXTURE, MLP_FIXTURE, "--format", "json")
    report = json.loads(res.stdout)
    assert [r["figure"] for r in report["steps"]] == ["gpu_busy", "gpu_span", "cpu_step", "iteration"]
    for figure in report["steps"]:
        assert {"predicted_ms", "measured_ms", "error_pct"} <= set(figure)
    row = report["worst_kernels"][0]  # *_ns keys hold nanoseconds: the fixture's kernels last µs, not ms
    assert row["measured_ns"] > 1000


# --- 6. no absolute paths, target occupancy, marked as a prediction -------------------------------------------

def test_output_names_the_input_by_file_name_only(tmp_path: Path) -> None:
    src = tmp_path / "secret-project" / "prof.pt.trace.json.gz"
    src.parent.mkdir()
    shutil.copy(MLP_FIXTURE, src)
    out = tmp_path / "out.json.gz"
    assert cli("scale", src, "--to", "L4", "-o", out).returncode == 0
    raw = gzip.decompress(out.read_bytes())
    assert b"secret-project" not in raw
    assert json.loads(raw)["habitat_trace"]["input"] == "prof.pt.trace.json.gz"


def test_check_finds_the_input_beside_a_moved_output(tmp_path: Path) -> None:
    doc = _doc()
    doc["traceEvents"] += [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 99, "tid": 99, "ts": ts,
                            "dur": 10.0} for n, ts in (("a", 100.0), ("b", 105.0))]  # a nesting violation
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (a / "in.json").write_text(json.dumps(doc))
    assert cli("scale", a / "in.json", "--to", "L4", "-o", a / "out.json.gz").returncode == 0
    a.rename(b)
    res = cli("check", b / "out.json.gz", cwd=tmp_path)
    assert res.returncode == 0 and "also in the input" in res.stdout, res.stdout + res.stderr
    (b / "in.json").unlink()  # issue 26: the output records its input's violations, so the input is not needed
    res = cli("check", b / "out.json.gz", cwd=tmp_path)
    assert res.returncode == 0 and "also in the input" in res.stdout, res.stdout + res.stderr


def test_scaled_trace_has_target_occupancy_args(tmp_path: Path) -> None:
    out = tmp_path / "l4.json.gz"
    assert cli("scale", MLP_FIXTURE, "--to", "L4", "-o", out).returncode == 0
    l4_sms = next(g for g in json.loads(cli("gpus", "--format", "json").stdout) if g["name"] == "L4")["sms"]
    kernels = [e for e in _events_of(out)["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels
    for k in kernels:
        a = k["args"]
        blocks = a["grid"][0] * a["grid"][1] * a["grid"][2]
        threads = a["block"][0] * a["block"][1] * a["block"][2]
        assert a["blocks per SM"] == pytest.approx(blocks / l4_sms, abs=1e-6)
        assert a["warps per SM"] == pytest.approx(blocks / l4_sms * threads / 32, abs=1e-5)
        assert 0 <= a["est. achieved occupancy %"] <= 100


@pytest.mark.parametrize("path", [MLP_FIXTURE, pytest.param(GPT2, marks=needs_shared)], ids=["mlp", "gpt2"])
def test_occupancy_args_recomputed_for_the_origin_match_kineto(path: Path) -> None:
    """The formula against Kineto's own numbers: a trace's kernels, recomputed for their own GPU. GPT-2 has
    register-limited kernels at 12.5%, which Kineto writes as 13 (halves round up)."""
    from habitat_trace.pipeline.document import target_occupancy_args
    from habitat_trace.ingest import load
    from habitat_trace.ingest import schema as S
    from habitat_trace.scale.specs import load_catalog

    trace = load(path)
    bpsm, wpsm, occ, had = target_occupancy_args(trace.gpu, load_catalog(None).for_device(trace.device_name))
    g = trace.gpu[had]
    assert had.sum() > 100
    assert bpsm[had] == pytest.approx(g[S.CUPTI_BLOCKS_PER_SM].to_numpy(), abs=1e-3)
    assert wpsm[had] == pytest.approx(g[S.CUPTI_WARPS_PER_SM].to_numpy(), abs=1e-3)
    # Kineto caps shared memory at the 48 KiB default (scale/occupancy.py); below it the estimates agree
    small = (g[S.SHARED_MEM] <= 48 * 1024).to_numpy()
    assert (occ[had][small] == g[S.CUPTI_OCCUPANCY].to_numpy()[small]).all()


def test_inspect_says_a_scaled_trace_is_a_prediction(tmp_path: Path) -> None:
    out = tmp_path / "l4.json.gz"
    assert cli("scale", MLP_FIXTURE, "--to", "L4", "-o", out).returncode == 0
    res = cli("inspect", out)
    assert "a prediction" in res.stdout and "for L4" in res.stdout and "H100 SXM5 80GB" in res.stdout
    assert "a prediction written by habitat-trace scale" in res.stderr  # the warning
    js = json.loads(cli("inspect", out, "--format", "json").stdout)["traces"][0]
    assert js["prediction"]["target"] == "L4" and js["prediction"]["origin"] == "H100 SXM5 80GB"
    assert json.loads(cli("inspect", MLP_FIXTURE, "--format", "json").stdout)["traces"][0]["prediction"] is None


# --- 7. warnings on stderr -------------------------------------------------------------------------------------

def test_scale_warns_without_recorded_shapes(tmp_path: Path) -> None:
    doc = _doc()
    doc["record_shapes"] = 0
    for e in doc["traceEvents"]:
        for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
            (e.get("args") or {}).pop(key, None)
    src = tmp_path / "noshapes.json"
    src.write_text(json.dumps(doc))
    res = cli("scale", src, "--to", "L4", "-o", tmp_path / "o.json.gz")
    assert res.returncode == 0 and "record_shapes=True" in res.stderr, res.stderr


@needs_shared
def test_scale_warns_when_the_target_lacks_the_trace_precision(tmp_path: Path) -> None:
    res = cli("scale", GPT2, "--to", "T4", "-o", tmp_path / "t4.json.gz")
    assert res.returncode == 0 and "no bf16 tensor path on T4" in res.stderr, res.stderr


def test_amd_devices_are_named_once(tmp_path: Path) -> None:
    """Item 7 pinned the AMD refusal repeating the device name per device; since issue 20 AMD traces are read,
    not refused: eight devices of one name are still named once."""
    doc = _doc()
    doc["deviceProperties"] = [{"id": i, "name": "AMD Instinct MI250X"} for i in range(8)]
    src = tmp_path / "amd.json"
    src.write_text(json.dumps(doc))
    res = cli("inspect", src)
    assert res.returncode == 0 and res.stdout.count("AMD Instinct MI250X") == 1, res.stdout + res.stderr


# --- 8. progress on a terminal only ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["scale", "inspect"])
def test_progress_shows_on_a_terminal_and_not_in_a_pipe(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "in.pt.trace.json"
    os.mkfifo(fifo)
    extra = ["--to", "L4", "-o", tmp_path / "o.json.gz"] if command == "scale" else []
    term = Pty([command, fifo, *extra], cols=100, stdout_pipe=True)
    shown = term.read_until("reading in.pt.trace.json")  # the command waits on the FIFO meanwhile
    _feed_fifo(fifo, gzip.decompress(MLP_FIXTURE.read_bytes()))
    assert term.finish() == 0, term.text
    assert shown, term.text
    feeder = _feed_fifo(fifo, gzip.decompress(MLP_FIXTURE.read_bytes()))
    res = cli(command, fifo, *extra)
    feeder.join(30)
    assert res.returncode == 0, res.stderr
    assert "reading" not in res.stderr and "\x1b" not in res.stderr


# --- 9. 80 columns ---------------------------------------------------------------------------------------------

def _at_80_columns(args: list[Any], how: str) -> str:
    """The command's stdout at 80 columns: in an 80-column pty, or piped with COLUMNS=80."""
    if how == "terminal":
        term = Pty(args, cols=80)
        assert term.finish() == 0, term.text
        return term.text
    return cli(*args, env=_env(COLUMNS="80")).stdout


def _numbers_intact(table_text: str, numbers: list[str]) -> None:
    text = ANSI.sub("", table_text)
    for n in numbers:
        assert re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", text), f"{n} is cut or missing:\n{text}"
    assert "…" not in "".join(re.findall(r"[\d.]+…", text))


@pytest.mark.parametrize("how", ["terminal", "COLUMNS"])
def test_compare_keeps_every_number_at_80_columns(how: str) -> None:
    args = ["compare", MLP_FIXTURE, "--to", "A100,L4,T4,H200"]
    rows = json.loads(cli(*args, "--format", "json").stdout)
    numbers = [f"{r['iteration_ms']:.2f}" for r in rows] + [f"{r['speedup']:.2f}x" for r in rows] + \
              [f"{r['usd_per_1k_iterations']:.4f}" for r in rows]
    text = _at_80_columns(args, how)
    _numbers_intact(text, numbers)
    table = [line for line in ANSI.sub("", text).splitlines() if "│" in line or "x " in line]
    assert all(len(line.rstrip()) <= 80 for line in table)


@pytest.mark.parametrize("how", ["terminal", "COLUMNS"])
def test_explain_keeps_every_number_at_80_columns(how: str) -> None:
    args = ["explain", MLP_FIXTURE, "--to", "T4", "--top", "5"]
    e = json.loads(cli(*args, "--format", "json").stdout)
    numbers = [f"{r[k]:{'+' if k == 'change_ms' else ''}.3f}" for r in e["ops"] + e["kernels"]
               for k in ("origin_ms", "target_ms", "change_ms")]
    text = _at_80_columns(args, how)
    _numbers_intact(text, numbers)


# --- 10. help, --version, -q, -v -------------------------------------------------------------------------------

def test_help_shows_the_specs_syntax_and_readable_metavars() -> None:
    res = cli("scale", "--help", env=_env(COLUMNS="200"))
    assert res.returncode == 0
    assert '[gpus."NAME"]' in res.stdout
    assert "<bool>" not in res.stdout and "<list[str]>" not in res.stdout
    assert "GPU[,GPU]|all" in res.stdout


def test_version_prints_the_package_version() -> None:
    from habitat_trace import __version__

    res = cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"habitat-trace {__version__}"


def test_quiet_prints_nothing_but_errors_and_verbose_logs_the_steps(tmp_path: Path) -> None:
    res = cli("-q", "scale", MLP_FIXTURE, "--to", "L4", "-o", tmp_path / "q.json.gz")
    assert res.returncode == 0 and res.stdout == "" and res.stderr == ""
    assert (tmp_path / "q.json.gz").is_file()
    res = cli("-q", "scale", MLP_FIXTURE, "--to", "NoSuchGPU", "-o", tmp_path / "e.json.gz")
    assert res.returncode == 4 and res.stderr.startswith("error:")
    res = cli("-v", "scale", MLP_FIXTURE, "--to", "L4", "-o", tmp_path / "v.json.gz")
    assert res.returncode == 0
    assert re.search(r"INFO: reading mlp_b32_fp32.pt.trace.json.gz \(\d+\.\d+ s\)", res.stderr), res.stderr
    assert "INFO: L4: writing v.json.gz" in res.stderr


# --- 11. the plot ----------------------------------------------------------------------------------------------

def test_plot_of_the_whole_catalog_is_readable(tmp_path: Path) -> None:
    """``compare --to all --plot``: the PNG is written; the same table's figure has a log time axis (T4 vs
    B200), says lower is better, keeps the title clear of the panels, and marks a GPU that does not fit
    memory in the time panel too."""
    pytest.importorskip("matplotlib")
    import pandas as pd

    from habitat_trace.commands.plot import NO_FIT, compare_figure

    png = tmp_path / "all.png"
    res = cli("compare", MLP_FIXTURE, "--to", "all", "--plot", png, "--format", "json")
    assert res.returncode == 0 and png.stat().st_size > 0, res.stderr
    table = pd.DataFrame(json.loads(res.stdout))
    assert len(table) >= 30
    table.loc[len(table) - 1, "iteration_ms"] = table["iteration_ms"].min() * 60  # a T4-like outlier
    table.loc[len(table) - 1, "fits_memory"] = False
    fig = compare_figure(table, "all.png")
    fig.canvas.draw()
    ax_t, ax_c = fig.axes
    assert ax_t.get_xscale() == "log"
    assert all("lower is better" in ax.get_xlabel() for ax in (ax_t, ax_c))
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    for ax in (ax_t, ax_c):
        assert not title.overlaps(ax.get_tightbbox(renderer)), "the title overlaps a panel"
    assert any(NO_FIT in t.get_text() for t in ax_t.texts)
