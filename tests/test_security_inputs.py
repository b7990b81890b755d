"""Inputs that used to be misread or crash: unicode digits in the calculator, argv that is not UTF-8, SQLite
URLs (relative and absolute, the long-term store in the file too), a missing --index, and the OpenAI embedder
against a local server (no tokenizer download)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.store.sqlite import SqliteStore

from reactgraph.cli.app import main
from reactgraph.tools.builtin.calculator import calculator_tool
from reactgraph.tools.call import ToolInputError
from support.cli_env import clean_env
from support.provider_openai import EMBEDDING_DIM
from support.provider_server import ProviderServer

calculator = calculator_tool()
NOTES = """# Project Falcon notes

## Decisions

- The launch date of Project Falcon moved to 14 October, because the payment provider needs two more weeks.
- Ingrid owns the security review; the penetration test is booked with an outside firm.
"""


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


# --- calculator: unicode digits ------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "expected"), [
    ("2²", 4), ("10³", 1000), ("3²+4²", 25), ("(1+2)²", 9), ("-2²", -4), ("2¹⁰", 1024), ("10⁻³", 0.001),
    ("２²", 4), ("１２+3", 15), ("１２×３", 36), ("٣+٤", 7), ("١٢٫٥×2", 25), ("۱۲+۳", 15),  # noqa: RUF001
    ("२+२", 4),
    ("๓×๓", 9), ("2²等于多少", 4),
])
def test_unicode_digits_and_superscript_powers_are_evaluated_correctly(expression, expected):
    assert calculator.run(expression=expression)["result"] == expected


@pytest.mark.parametrize("expression", ["2₂", "①+1", "1½", "½*4", "⒈5+1", "10²₃"])
def test_digit_look_alikes_are_refused_rather_than_misread(expression):
    with pytest.raises(ToolInputError, match="is not a plain number") as caught:
        calculator.run(expression=expression)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("question", "result"), [("计算 10³", "1000"), ("2²+3² 等于多少？", "13"),
                                                 ("what is 2³ * 5", "40")])
def test_the_offline_model_reads_superscripts_as_powers_too(question, result, capsys):
    assert main(["ask", question, "--store", "memory", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "answered" and f"= {result}" in payload["answer"]


# --- the command line: arguments that are not UTF-8, a missing --index ------------------------------------

def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2_before_anything_runs(tmp_path):
    store = tmp_path / "sessions.db"
    # bytes that are not UTF-8 (a terminal in another encoding); Python hands them over as lone surrogates
    done = subprocess.run([sys.executable, "-m", "reactgraph.cli", "ask", b"2+3 \xff\xfe".decode(
        "utf-8", "surrogateescape"), "--store", f"sqlite:///{store}"], capture_output=True, text=True, timeout=60,
        env=clean_env())
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "argument 2 is not valid UTF-8" in lines[0] and r"2+3 \xff\xfe" in lines[0]
    assert done.stdout == "" and not store.exists()


@pytest.mark.parametrize("argv", [["ask", "hi", "--session", "s\udcff"], ["tools", "--json", "\ud800"]])
def test_any_argument_with_a_lone_surrogate_is_refused(argv, capsys):
    assert main(argv) == 2
    assert "is not valid UTF-8" in one_error_line(capsys)


def test_a_missing_index_is_named_in_one_line(tmp_path, capsys):
    missing = tmp_path / "no-such-kb"
    assert main(["ask", "According to my notes, who owns the security review?", "--index", str(missing),
                 "--store", "memory", "--json"]) == 2
    line = one_error_line(capsys)
    assert f"--index {missing}: does not exist" in line and "reactgraph ingest" in line


def test_a_directory_that_is_no_index_is_refused_and_so_is_a_wrong_reactgraph_index(tmp_path, capsys, monkeypatch):
    assert main(["ask", "hi", "--index", str(tmp_path), "--store", "memory"]) == 2
    assert "is not a knowledge-base index" in one_error_line(capsys)
    monkeypatch.setenv("REACTGRAPH_INDEX", str(tmp_path / "typo"))
    assert main(["ask", "hi", "--store", "memory"]) == 2
    assert f"$REACTGRAPH_INDEX={tmp_path / 'typo'}: does not exist" in one_error_line(capsys)


# --- SQLite URLs ------------------------------------------------------------------------------------------

def _qa_log(path: Path, session: str) -> list[dict]:
    store = SqliteStore(sqlite3.connect(path, check_same_thread=False, isolation_level=None))
    return [item.value for item in store.search(("sessions", session, "qa"))]


def test_sqlite_urls_read_as_sqlalchemy_and_keep_the_long_term_store_in_the_file(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["ask", "计算 2+3", "--store", "sqlite:///data/rel.db", "--session", "s1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"]
    relative = work / "data" / "rel.db"  # three slashes: relative to the working directory
    assert relative.is_file()
    absolute = tmp_path / "abs" / "sessions.db"
    assert main(["ask", "计算 6*7", "--store", f"sqlite:///{absolute}", "--session", "s2", "--json"]) == 0
    assert absolute.is_file() and not (work / str(absolute).lstrip("/")).exists()  # four slashes: absolute
    capsys.readouterr()
    # the Q&A log is in the same file as the checkpoints, so it survives the process like the session does
    assert [entry["question"] for entry in _qa_log(relative, "s1")] == ["计算 2+3"]
    assert [entry["question"] for entry in _qa_log(absolute, "s2")] == ["计算 6*7"]
    assert main(["ask", "计算 1+1", "--store", "sqlite:///data/rel.db", "--session", "s1", "--json"]) == 0
    assert sorted(entry["question"] for entry in _qa_log(relative, "s1")) == ["计算 1+1", "计算 2+3"]


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:relative.db"])
def test_a_sqlite_url_without_a_file_is_one_line(url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["ask", "hi", "--store", url]) == 2
    line = one_error_line(capsys)
    assert "names no file" in line and "sqlite:////absolute" in line
    assert list(tmp_path.iterdir()) == []


# --- the OpenAI embedder against a local server -----------------------------------------------------------

def test_the_openai_embedder_works_with_a_local_server_and_downloads_nothing(tmp_path, monkeypatch, capsys):
    # An empty tiktoken cache: had the client counted tokens, tiktoken would fetch its tables from the internet,
    # which the suite's audit hook turns into a failure of this test.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    monkeypatch.setenv("REACTGRAPH_EMBEDDER", "openai:local-embedding-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    notes = tmp_path / "docs" / "falcon.md"
    notes.parent.mkdir()
    notes.write_text(NOTES, encoding="utf-8")
    index = str(tmp_path / "index")
    with ProviderServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        assert main(["ingest", str(notes), "--index", index, "--json"]) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["files"][0]["status"] == "added"
        assert main(["ask", "According to the documents, when is the launch date of Project Falcon?",
                     "--index", index, "--store", "memory", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
    assert "14 October" in result["answer"] and "falcon.md" in result["answer"]
    inputs = [item for body in server.embedding_requests for item in
              ([body["input"]] if isinstance(body["input"], str) else body["input"])]
    assert inputs and all(isinstance(item, str) for item in inputs)  # raw text, never tiktoken's token arrays
    assert any("launch date of Project Falcon" in item for item in inputs)
    assert {body["model"] for body in server.embedding_requests} == {"local-embedding-model"}
    embedder = json.loads((Path(index) / "meta.json").read_text())["embedder"]
    assert embedder["name"] == "openai:local-embedding-model" and embedder["dim"] == EMBEDDING_DIM  # probed
