"""The XYB colour transform (opsin absorbance) shared by SSIMULACRA2 and zensim: twin and numba rows."""
