"""One process of a multi-process run, started by the Plan's launch command:

    deepspeed --num_nodes 1 --num_gpus 2 --master_port P --module ragen_cli.train.worker RUN_DIR [--resume]

It reads the run directory's resolved spec.yaml and plan.json (written by `ragen train`) and
runs the training loop; the launcher sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_* and adds
`--local_rank=N`, which is accepted and ignored (the environment says the same).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragen-worker")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--local_rank", type=int, default=None)
    args = parser.parse_args(argv)
    from ragen_cli.compile.plan import Plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    spec = load_spec(args.run_dir / "spec.yaml")
    plan = Plan.from_json((args.run_dir / "plan.json").read_text())
    train(spec, plan, args.run_dir, resume=args.resume)
    return 0


if __name__ == "__main__":
    from ragen_cli.process_exit import end_process

    import traceback

    code = 1
    try:
        code = main()
    except BaseException:  # the traceback is also in events.jsonl (kind "error")
        traceback.print_exc()
    finally:  # as `ragen`: no interpreter teardown once the run is done (see cli.main)
        end_process(code)
