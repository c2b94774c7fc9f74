"""distcore.jobs: the headless job index that both front ends render (no Textual, no TF)."""
