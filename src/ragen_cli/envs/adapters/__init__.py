"""Outside environments and data, each behind the one text-env protocol the rollout driver
speaks (`TextEnv`: reset / step / instruction / valid_actions): a spec names the adapter
(`env.train.name: gymnasium | textarena | openenv | dataset`) and configures it; the driver does
not learn about any of them (docs/envs.md, "Bring your own")."""
