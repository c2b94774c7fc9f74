"""The dashboard's widgets, and the pure view-model functions they render (view_model.py,
braille.py)."""
