"""What the runs are: run folders collected into rows (one a run, the same columns for every strategy), their group
keys and column lists, and the text form of their figures. The projection and the report both read them; this
part reads neither (bench/analysis: runs -> projection -> report)."""
