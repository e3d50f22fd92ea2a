"""The `peagle` command line."""
