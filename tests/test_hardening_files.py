"""Issue 13, classes 3 and 6: completed runs and caches are verified by content hash; files get
the process umask; report and diagnose read nothing outside the folder they were given."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from tailmem.cli import main
from tailmem.data.corpus import CorpusConfig, build_corpus, load_corpus
from tailmem.data.text_sources import stdlib_text_file
from tailmem.diagnose import diagnose
from tailmem.errors import ConfigError, DataError, TailmemError
from tailmem.experiments import headline_questions
from tailmem.report.render import write_report
from tailmem.rundir import RunDir
from tailmem.runner import run_experiment
from tailmem.train.checkpoint import FORMAT, VERSION


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tailmem: error: "), err
    return err[0]


# ------------------------------------------------------------------ COMPLETE lists its files


def _complete_run(fake_experiment, out: Path) -> RunDir:
    run, status = run_experiment("fake", "smoke", [], out=out)
    assert status == "ran" and run.is_complete
    return run


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda r: (r / "results.json").unlink(), "results.json listed in COMPLETE is missing"),
        (lambda r: (r / "config.yaml").unlink(), "config.yaml listed in COMPLETE is missing"),
        (lambda r: _flip_last_byte(r / "results.json"), "results.json does not match the hash"),
        (lambda r: (r / "COMPLETE").write_text("oops"), "is not a JSON record"),
        (lambda r: (r / "COMPLETE").write_text('{"finished": "x"}'), "lists no files"),
        (
            lambda r: (r / "COMPLETE").write_text('{"files": {"../x": "0"}}'),
            "listed in COMPLETE is missing",
        ),
    ],
)
def test_complete_means_listed_files_with_their_hashes(fake_experiment, tmp_path, damage, reason):
    out = tmp_path / "run"
    run = _complete_run(fake_experiment, out)
    listed = json.loads((out / "COMPLETE").read_text())["files"]
    assert set(listed) == {"config.yaml", "results.json"}  # not progress.json, not .lock
    damage(out)
    assert not run.is_complete and reason in run.incomplete_reason()
    if not (out / "config.yaml").exists():  # a run without its record: only --force redoes it
        with pytest.raises(ConfigError, match=r"holds a run without its config\.yaml record"):
            run_experiment("fake", "smoke", [], out=out)
        assert run_experiment("fake", "smoke", [], out=out, force=True)[1] == "ran"
    else:
        assert run_experiment("fake", "smoke", [], out=out)[1] == "resumed"  # not skipped
    assert run.is_complete


def test_report_shows_a_damaged_complete_run_as_incomplete(fake_experiment, tmp_path):
    out = tmp_path / "results" / "fake"
    _complete_run(fake_experiment, out)
    (out / "results.json").unlink()
    assert (
        "This run is incomplete"
        in write_report(tmp_path / "results", headline_questions()).read_text()
    )


# ------------------------------------------------------------------ corpus cache hashes

SMALL = {"max_docs": 40, "vocab_size": 300, "val_fraction": 0.1}


@pytest.fixture(scope="module")
def corpus_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpus")


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        (
            "train.npy",
            lambda p: p.write_bytes(p.read_bytes()[:128] + bytes(len(p.read_bytes()) - 128)),
        ),
        ("train.npy", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])),
        ("val.npy", lambda p: _flip_last_byte(p)),
        ("unigram_counts.npy", lambda p: _flip_last_byte(p)),
        ("tokenizer.json", lambda p: p.write_text(p.read_text().replace("a", "b", 1))),
    ],
)
def test_a_damaged_corpus_cache_is_refused_and_rebuilt(corpus_cache, name, damage):
    cfg = CorpusConfig(**SMALL)
    corpus = build_corpus(cfg, corpus_cache)
    train, val = np.array(corpus.train), np.array(corpus.val)
    damage(corpus.path / name)
    with pytest.raises(DataError, match=f"{name} does not match the hash in meta.json"):
        load_corpus(corpus.path)
    rebuilt = build_corpus(cfg, corpus_cache)
    assert rebuilt.path == corpus.path
    np.testing.assert_array_equal(rebuilt.train, train)
    np.testing.assert_array_equal(rebuilt.val, val)


def test_a_damaged_text_cache_is_extracted_again(corpus_cache):
    build_corpus(CorpusConfig(**SMALL), corpus_cache)  # extracts the standard-library text
    path = stdlib_text_file(corpus_cache)
    original = path.read_bytes()
    path.write_bytes(original[: len(original) // 2])  # a truncated cache: fewer documents
    assert stdlib_text_file(corpus_cache).read_bytes() == original
    Path(f"{path}.sha256").unlink()  # no recorded hash: not trusted either
    assert stdlib_text_file(corpus_cache).read_bytes() == original


# ------------------------------------------------------------------ the process umask


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_and_cache_folders_get_the_process_umask(tmp_path, umask, mode):
    script = (
        "import os, sys; os.umask(int(sys.argv[2], 8));"
        "from tailmem.rundir import RunDir; RunDir(sys.argv[1]).write_json('a.json', {})"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "r"), oct(umask)[2:]], check=True, env=env
    )
    assert (tmp_path / "r" / "a.json").stat().st_mode & 0o777 == mode
    old = os.umask(umask)
    try:
        corpus = build_corpus(CorpusConfig(**SMALL), tmp_path / "cache")
    finally:
        os.umask(old)
    assert corpus.path.stat().st_mode & 0o777 == mode | ((mode & 0o444) >> 2)  # r -> x
    assert (corpus.path / "meta.json").stat().st_mode & 0o777 == mode


# ------------------------------------------------------------------ report.json stays in the run


@dataclass
class _Seed:
    seed: int = 0


def _report_run(root: Path, layout: object) -> Path:
    from tailmem.outputs import Outputs, write

    run = RunDir(root / "exp")
    run.write_config("assoc-capacity", "smoke", _Seed())
    write(run, Outputs(claims=()))
    (run.path / "t.csv").write_text("a,b\n1,2\n")
    run.write_json("report.json", layout)
    return run.path


@pytest.mark.parametrize(
    ("layout", "fragment"),
    [
        ({"figures": [{"file": "/etc/passwd", "caption": "x"}]}, "outside the run directory"),
        ({"tables": [{"file": "../../outside.csv"}]}, "outside the run directory"),
        ({"figures": "a.png"}, "'figures' must be a list"),
        ({"figures": [3]}, "figures[0] is 3; expected {'file': NAME, 'caption': TEXT}"),
        ({"tables": [{"file": 7}]}, "tables[0] is {'file': 7}"),
        ({"tables": [{"file": "t.csv", "caption": ["x"]}]}, "tables[0]"),
        ({"title": 5}, "'title' must be text"),
        ({"summary": {"a": 1}}, "'summary' must be text"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_damaged_or_escaping_report_entries_are_one_line(tmp_path, capsys, layout, fragment):
    (tmp_path / "outside.csv").write_text("secret,1\n")
    _report_run(tmp_path / "results", layout)
    assert main(["report", str(tmp_path / "results")]) == 2
    assert fragment in one_line_error(capsys)
    assert not (tmp_path / "results" / "report.html").exists()


def test_a_symlinked_figure_pointing_out_of_the_run_is_not_embedded(tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG-not-for-the-report")
    path = _report_run(tmp_path / "results", {})
    (path / "leak.png").symlink_to(secret)
    html = write_report(tmp_path / "results", headline_questions()).read_text()
    assert "leak" not in html and "data:image/png" not in html


# ------------------------------------------------------------------ diagnose


def _hf_folder(root: Path, config: dict, tensors: dict | None = None) -> Path:
    from safetensors.torch import save_file

    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    tensors = tensors or {
        "h.0.attn.c_attn.weight": torch.randn(8, 24),
        "h.0.attn.c_proj.weight": torch.randn(8, 8),
    }
    save_file(tensors, str(root / "model.safetensors"))
    return root


def test_diagnose_refuses_what_is_not_a_model_in_one_line(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# hello\n")
    table = tmp_path / "t.csv"
    table.write_text("a,b\n1,2\n")
    record = tmp_path / "x.json"
    record.write_text('{"a": 1}')
    bare = tmp_path / "notes"
    bare.write_text("plain text")
    ckpt_dir = tmp_path / "run" / "ckpt"
    ckpt_dir.mkdir(parents=True)
    payload = {"format": FORMAT, "version": VERSION}
    torch.save({**payload, "step": -5, "model": {}}, ckpt_dir / "step_000001.pt")
    nan_weights = {"h.0.attn.c_attn.weight": torch.full((8, 24), float("nan"))}
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    (sharded / "config.json").write_text('{"n_head": 2}')
    index = {"weight_map": {"h.0.attn.c_proj.weight": "../outside.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    absolute = tmp_path / "absolute"
    absolute.mkdir()
    (absolute / "config.json").write_text('{"n_head": 2}')
    index = {"weight_map": {"h.0.attn.c_proj.weight": str(tmp_path / "h0" / "model.safetensors")}}
    (absolute / "model.safetensors.index.json").write_text(json.dumps(index))
    cases = [
        ([str(readme)], "README.md is not a checkpoint (a MD file); expected a training"),
        ([str(table)], "is not a checkpoint (a CSV file)"),
        ([str(record)], "is not a checkpoint (a JSON file)"),
        ([str(bare)], "is not a checkpoint (not a torch file)"),
        ([str(ckpt_dir / "step_000001.pt")], "has step -5; expected a step count ≥ 0"),
        ([str(_hf_folder(tmp_path / "h0", {"n_head": 0}))], "head count 0; expected a positive"),
        ([str(_hf_folder(tmp_path / "hx", {"n_head": "2"}))], "head count '2'"),
        ([str(_hf_folder(tmp_path / "hn", {"n_head": 2}, nan_weights))], "NaN or infinite"),
        ([str(sharded)], "lies outside the model folder"),
        ([str(absolute)], "lies outside the model folder"),
        ([str(readme), "--top-k", "0"], "--top-k: got 0; expected a positive integer"),
        ([str(readme), "--top-k", "-3"], "--top-k: got -3"),
    ]
    for args, fragment in cases:
        assert main(["diagnose", *args]) == 2, args
        line = one_line_error(capsys)
        assert "corrupt checkpoint" not in line
        if fragment is not None:
            assert fragment in line, (args, line)
    torch.save({**payload, "step": 3}, ckpt_dir / "step_000002.pt")  # no model
    with pytest.raises(TailmemError, match="has no model state dict"):
        diagnose(ckpt_dir / "step_000002.pt")
