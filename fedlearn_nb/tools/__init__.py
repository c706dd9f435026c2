"""Tools built on the library: the documentation site builder, the paper runner, the main job and the Flower adapter.

Nothing is imported here, so `import fedlearn_nb` and the algorithms never pull these modules' dependencies."""
