"""ragen: train LLM agents with multi-turn RL (StarPO / StarPO-S).

Importing this package is light: no torch, vllm or deepspeed (checked by tests/test_imports.py).
"""

__version__ = "0.1.0"
