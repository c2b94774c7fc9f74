"""What the dashboard's widgets draw, as pure functions over the snapshot: rows, cells, curves,
braille rasters and the GPU panel's lines, built with Rich's `Text` and never Textual, so that
they are tested as plain data and shared by the headless views. Widgets import this package;
it imports no widget."""
