"""The dashboard's widgets, and the pure view-model functions they render (model.py, braille.py)."""
