"""Analysis of what runs recorded: the report (summary.csv, report.html) and the projection to
clusters bigger than any measured."""
