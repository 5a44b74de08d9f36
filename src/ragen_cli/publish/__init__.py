"""Publishing a trained policy: export a checkpoint as a model directory, its model card, the hub push."""
