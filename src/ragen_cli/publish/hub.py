"""`ragen export --push-to-hub REPO`: the exported directory (model + README.md card) uploaded to a
Hugging Face model repo through `huggingface_hub` (`create_repo`, then `upload_folder`).

`check_push` runs before anything is exported, so a push that cannot work (offline mode, a bad
repo id, no login) is exit 2 with the fix and nothing written; `push` raises `HubError` when the
hub refuses or cannot be reached (the exported directory stays, to upload again later)."""

from __future__ import annotations

import os
from pathlib import Path

from ragen_cli.models.builtin import hub_offline


class HubError(Exception):
    """A push that cannot be done (the message says why and what to do)."""


def hub_api():
    """The client every push goes through (one place, so tests can stand in at this boundary)."""
    from huggingface_hub import HfApi

    return HfApi()


def check_push(repo: str, out: Path) -> None:
    """Everything about a push that can be known without the network."""
    from huggingface_hub import get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    later = f"or export without --push-to-hub and upload the directory later: hf upload {repo} {out}"
    if hub_offline():
        raise HubError(f"--push-to-hub needs the Hugging Face Hub, but HF_HUB_OFFLINE="
                       f"{os.environ.get('HF_HUB_OFFLINE')} is set (offline mode): unset it "
                       f"(`env -u HF_HUB_OFFLINE ragen export ...`), {later}")
    try:
        validate_repo_id(repo)
    except HFValidationError as err:
        raise HubError(f"--push-to-hub {repo!r} is not a hub repo id (org/name or name): {err}") from None
    if get_token() is None:
        raise HubError(f"--push-to-hub needs a Hugging Face login: run `hf auth login` or set HF_TOKEN, {later}")


def push(out: Path, repo: str, private: bool, checkpoint: Path) -> str:
    """Create `repo` if it does not exist (private when asked; an existing repo keeps its
    visibility) and upload `out` to it as one commit; returns the commit's URL."""
    api = hub_api()
    try:
        url = api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=url.repo_id, folder_path=str(out), repo_type="model",
                                   commit_message=f"ragen export of {checkpoint.parent.parent.name}/{checkpoint.name}")
    except Exception as err:  # huggingface_hub raises HTTP, network and OS errors of several types
        raise HubError(f"push to {repo} failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}; "
                       f"{out} is exported, upload it again with: hf upload {repo} {out}") from None
    return commit.commit_url
