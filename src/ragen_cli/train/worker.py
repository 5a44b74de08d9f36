"""One process of a multi-process run, started by the Plan's launch command:

    deepspeed --num_nodes 1 --num_gpus 2 --master_port P --module ragen_cli.train.worker RUN_DIR [--resume]

(on several nodes with `ragen train --node-rank R`, each node's own launcher, with `--no_ssh
--node_rank R --master_addr HOST0` added: compile/launch.py `launch_command`).

It reads the run directory's resolved spec.yaml and plan.json (written by `ragen train`) and
runs the training loop; the launcher sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_* and adds
`--local_rank=N`, which is accepted and ignored (the environment says the same). With several
nodes the run directory must be shared (`unshared_run_dir`): a rank that cannot see it stops at
once, exit 2, naming its host.
"""

from __future__ import annotations

import argparse
from pathlib import Path


class RunDirNotShared(RuntimeError):
    """A rank cannot see the run directory the launching host wrote."""


def unshared_run_dir(run_dir: Path, rank: str, host: str) -> str:
    """Why this rank cannot start from `run_dir`, or '' when spec.yaml and plan.json are there.

    `ragen train` writes both on the launching host only, and with several nodes every rank reads
    them, writes its share of each checkpoint into the run directory and waits for rank 0 to
    rename it: the run directory must be on a filesystem every node mounts at the same path."""
    missing = [name for name in ("spec.yaml", "plan.json") if not (run_dir / name).is_file()]
    if not missing:
        return ""
    return (f"ragen: rank {rank} on host {host} cannot see {', '.join(missing)} in the run directory {run_dir}: "
            "a run on several nodes needs its run directory (output.dir) on a filesystem that every node mounts "
            "at the same path (NFS, Lustre, a cluster home directory); set output.dir to such a path")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragen-worker")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--warm-start-only", action="store_true")
    parser.add_argument("--local_rank", type=int, default=None)
    args = parser.parse_args(argv)
    from ragen_cli.compile.plan import Plan
    from ragen_cli.spec.loader import load_spec
    from ragen_cli.train.loop import train

    import os
    import socket

    problem = unshared_run_dir(args.run_dir, os.environ.get("RANK", "?"), socket.gethostname())
    if problem:
        raise RunDirNotShared(problem)
    spec = load_spec(args.run_dir / "spec.yaml")
    plan = Plan.from_json((args.run_dir / "plan.json").read_text())
    train(spec, plan, args.run_dir, resume=args.resume, warm_start_only=args.warm_start_only)
    return 0


if __name__ == "__main__":
    from ragen_cli.process_exit import end_process

    import sys
    import traceback

    code = 1
    try:
        code = main()
    except RunDirNotShared as err:  # before any work: the message is the whole story
        print(err, file=sys.stderr, flush=True)
        code = 2
    except BaseException:  # the traceback is also in events.jsonl (kind "error")
        traceback.print_exc()
    finally:  # as `ragen`: no interpreter teardown once the run is done (see cli.main)
        end_process(code)
