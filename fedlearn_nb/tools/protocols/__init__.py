"""Each paper's experimental protocol: its scales, datasets and federations, the runs of each table, and the paper's own
numbers, so that the paper notebook in `papers/` only declares its tables, shows them and says what they mean.

Nothing is imported here: `import fedlearn_nb.tools.protocols.fedccl` loads one paper's protocol alone."""
