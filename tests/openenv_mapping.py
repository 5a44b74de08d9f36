"""`module:function` mappings for the OpenEnv adapter's tests (light: no openenv import)."""


def shout(obs: dict) -> str:
    """Observation -> text: the prompt in capitals."""
    return obs["prompt"].upper()


def say(text: str) -> dict | None:
    """Reply -> action: `!...` is refused here (invalid, never sent); else the message, lowered."""
    return None if text.startswith("!") else {"message": text.lower()}


def broken(text: str) -> dict:
    raise KeyError("no such field")
