"""`ragen export` with its model card and `--push-to-hub`.

The card is checked on a real tiny checkpoint (a 1-step LoRA run of the tiny-random model on the
Bandit env): first with no eval of it, then after a real `ragen eval` of that checkpoint, whose
eval.json numbers must appear in the card's table; an eval of other weights is never quoted.
The hub is not reachable here, so the push is checked at the library boundary: `hub.hub_api`
returns a `huggingface_hub.HfApi` subclass that records `create_repo` / `upload_folder`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from huggingface_hub import CommitInfo, HfApi, RepoUrl
from typer.testing import CliRunner

from ragen_cli.cli import app
from ragen_cli.publish import hub
from test_train_e2e import run_tiny

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, tiny_model_dir) -> Path:
    """RUN/checkpoints/step-1 of a real 1-step LoRA run (the bandit spec's LoRA rank 16, alpha 32)."""
    run = tmp_path_factory.mktemp("card") / "card-run"
    run_tiny(run, ["train.steps=1"])
    return run / "checkpoints" / "step-1"


def export(*args: str):
    return CliRunner().invoke(app, ["export", *map(str, args)])


def card_sections(text: str) -> tuple[dict, str]:
    """(front matter, body) of a README.md."""
    _, meta, body = text.split("---\n", 2)
    return yaml.safe_load(meta), body


def test_card_without_an_eval(ckpt, tmp_path):
    result = export(ckpt, tmp_path / "out")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert (out / "config.json").is_file() and list(out.glob("*.safetensors"))  # the model, LoRA merged
    meta, body = card_sections((out / "README.md").read_text())
    # tiny-random is no hub repo: no base_model metadata; the env is a tag
    assert "base_model" not in meta and meta["library_name"] == "transformers" and "bandit" in meta["tags"]
    assert body.startswith("\n# card-run (step 1)\n")
    assert "| base model | `tiny-random` |" in body
    assert "| weights | LoRA rank 16, alpha 32, merged |" in body
    assert "| algorithm | `starpo-s`, advantages `gae`, clip 0.2 / 0.28, KL coef 0.0" in body
    assert "| environment | `bandit` {}, 2 groups x 2 rollouts per step, up to 1 turn(s) per episode |" in body
    assert "| steps | 1 (of train.steps = 1) |" in body
    assert "Exported from checkpoint `card-run/checkpoints/step-1` (the LoRA adapter merged" in body
    assert "No `ragen eval` of this checkpoint" in body and "| env | episodes |" not in body
    # the run's resolved spec, whole
    assert (ckpt.parent.parent / "spec.yaml").read_text().rstrip() in body


def test_card_quotes_the_eval_of_this_checkpoint(ckpt, tmp_path):
    result = CliRunner().invoke(app, ["eval", "--checkpoint", str(ckpt), "--env", "bandit", "--episodes", "4",
                                      "--max-tokens", "8", "--backend", "hf"])
    assert result.exit_code == 0, result.output
    (path,) = (ckpt.parent.parent / "evals").glob("step-1-*/eval.json")
    report = json.loads(path.read_text())
    # an eval of other weights, newer: not quoted
    other = json.loads(path.read_text())
    other["manifest"]["policy"]["content_hash"] = "sha256:" + "0" * 64
    other["manifest"]["date"] = "2999-01-01T00:00:00+00:00"
    other["results"][0]["episodes"] = 999
    (path.parent.parent / "other").mkdir()
    (path.parent.parent / "other" / "eval.json").write_text(json.dumps(other))
    try:
        result = export(ckpt, tmp_path / "out")
    finally:
        shutil.rmtree(path.parent.parent / "other")
    assert result.exit_code == 0, result.output
    body = (tmp_path / "out" / "README.md").read_text()
    (r,) = report["results"]
    lo, hi = r["ci95"]
    row = (f"| bandit | 4 | {100 * r['success_rate']:.1f}% ({100 * lo:.1f}% to {100 * hi:.1f}%) | "
           f"{r['mean_reward']:.3f} | {r['score']:.3f} ({r['score_ci95'][0]:.3f} to {r['score_ci95'][1]:.3f}) |")
    assert row in body, body
    assert f"`evals/{path.parent.name}/eval.json` in the run directory" in body and "| 999 |" not in body


class RecordingApi(HfApi):
    """HfApi with the two calls a push makes recorded instead of sent (the files the upload
    would send are listed at call time)."""

    calls: list = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, **kwargs):
        folder = Path(kwargs["folder_path"])
        self.calls.append(("upload_folder", sorted(p.name for p in folder.iterdir()), kwargs))
        return CommitInfo(commit_url=f"https://huggingface.co/{kwargs['repo_id']}/commit/abc", commit_message="",
                          commit_description="", oid="abc")


@pytest.fixture
def recording(monkeypatch):
    RecordingApi.calls = []
    monkeypatch.setattr(hub, "hub_api", RecordingApi)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)  # a login, as `hf auth login` leaves one
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return RecordingApi.calls


def test_push_creates_the_repo_and_uploads_the_directory(ckpt, tmp_path, recording):
    out = tmp_path / "out"
    result = export(ckpt, out, "--push-to-hub", "me/tiny-bandit", "--private")
    assert result.exit_code == 0, result.output
    (create, upload) = recording
    assert create == ("create_repo", "me/tiny-bandit", {"repo_type": "model", "private": True, "exist_ok": True})
    assert upload[0] == "upload_folder" and "README.md" in upload[1] and "config.json" in upload[1]
    assert upload[2]["repo_id"] == "me/tiny-bandit" and Path(upload[2]["folder_path"]) == out
    assert upload[2]["repo_type"] == "model" and upload[2]["commit_message"] == "ragen export of card-run/step-1"
    assert 'from_pretrained("me/tiny-bandit")' in (out / "README.md").read_text()
    assert "pushed" in result.output and "https://huggingface.co/me/tiny-bandit/commit/abc" in result.output


def test_push_offline_is_exit_2_before_anything(ckpt, tmp_path, recording, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "out"
    result = export(ckpt, out, "--push-to-hub", "me/tiny-bandit")
    assert result.exit_code == 2
    assert "HF_HUB_OFFLINE=1 is set (offline mode): unset it" in result.stderr
    assert f"hf upload me/tiny-bandit {out}" in result.stderr
    assert recording == [] and not out.exists()


def test_push_refusals_before_and_after_the_export(ckpt, tmp_path, recording, monkeypatch):
    # no login: exit 2, nothing written
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))  # no stored token either
    result = export(ckpt, tmp_path / "a", "--push-to-hub", "me/tiny-bandit")
    assert result.exit_code == 2 and "hf auth login" in result.stderr and not (tmp_path / "a").exists()
    # --private alone, a bad repo id: exit 2
    result = export(ckpt, tmp_path / "b", "--private")
    assert result.exit_code == 2 and "give --push-to-hub REPO too" in result.stderr
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)
    result = export(ckpt, tmp_path / "c", "--push-to-hub", "me/two/slashes")
    assert result.exit_code == 2 and "not a hub repo id" in result.stderr
    assert recording == []

    # the hub refuses the upload: exit 1, the export kept, the command to retry named
    def refuse(self, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(RecordingApi, "upload_folder", refuse)
    result = export(ckpt, tmp_path / "d", "--push-to-hub", "me/tiny-bandit")
    assert result.exit_code == 1
    assert "push to me/tiny-bandit failed: OSError: connection refused" in result.stderr
    assert f"upload it again with: hf upload me/tiny-bandit {tmp_path / 'd'}" in result.stderr
    assert (tmp_path / "d" / "README.md").is_file()
