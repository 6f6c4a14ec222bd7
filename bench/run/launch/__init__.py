"""Starting and watching the processes of a run: in one process, as a TF cluster of ps and
worker tasks, or as MPI ranks; the supervisor that ends them all when one fails."""
