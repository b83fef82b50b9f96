"""`yts diagnose`: the ablation ladder (harness.diagnose.ladder)."""
