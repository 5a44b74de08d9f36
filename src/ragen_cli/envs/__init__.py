"""Text environments (never imports torch). Use `ragen_cli.envs.registry.make_env`."""
