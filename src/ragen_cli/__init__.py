"""ragen: train LLM agents with multi-turn RL (StarPO / StarPO-S).

Importing this package is light: no torch, vllm or deepspeed (checked by tests/test_imports.py).
The Python API (docs/api.md) is importable from here; its functions load what they need when
they run:

    import ragen_cli as ragen
    result = ragen.train_policy(ragen.load_spec("specs/bandit.yaml", ["train.steps=5"]))
"""

__version__ = "0.1.0"

__all__ = ["load_spec", "compile_plan", "train_policy", "evaluate", "read_metrics", "TrainResult"]


def __getattr__(name: str):
    """The API's names, loaded on first use (PEP 562): `import ragen_cli` stays light, and
    submodules that read `ragen_cli.__version__` do not pull the API in."""
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("ragen_cli.api"), name)
    raise AttributeError(f"module 'ragen_cli' has no attribute {name!r}")
