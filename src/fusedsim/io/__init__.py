"""Input/output: image files (Pillow) and video (Y4M, raw YUV)."""
