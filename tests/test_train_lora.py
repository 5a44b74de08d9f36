"""train/lora.py: the adapter folded into full weights for the rollout engine (rollout.lora_sync
merged), checked against peft's own forward and its merge_and_unload."""

from __future__ import annotations

import torch


def test_merged_state_dict_is_the_adapted_policy(tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    from ragen_cli.models.load import load_causal_lm
    from ragen_cli.train.lora import merged_state_dict

    base_keys = set(load_causal_lm(tiny_model_dir, "float32").state_dict())
    torch.manual_seed(0)
    # init_lora_weights=False: random A and B, so the adapter changes the outputs
    peft_model = get_peft_model(load_causal_lm(tiny_model_dir, "float32"),
                                LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    before = {k: v.clone() for k, v in peft_model.state_dict().items()}
    merged = merged_state_dict(peft_model)

    assert set(merged) == base_keys  # Hugging Face names, no adapter tensors
    # the trained module is untouched (no merge/unmerge round-off)
    assert all(torch.equal(v, before[k]) for k, v in peft_model.state_dict().items())

    # a plain model with the merged weights computes what the adapted model computes
    plain = load_causal_lm(tiny_model_dir, "float32")
    plain.load_state_dict(merged)
    ids = torch.randint(5, 400, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        adapted, served = peft_model(input_ids=ids).logits, plain(input_ids=ids).logits
        untouched = load_causal_lm(tiny_model_dir, "float32")(input_ids=ids).logits
    assert (adapted - untouched).abs().max() > 1e-2  # the adapter matters...
    torch.testing.assert_close(served, adapted, atol=1e-5, rtol=1e-5)  # ...and is folded in

    # and agrees with peft's own merge, to float rounding
    reference = peft_model.merge_and_unload().state_dict()
    for k in base_keys:
        torch.testing.assert_close(merged[k], reference[k], atol=1e-6, rtol=1e-6, msg=k)
