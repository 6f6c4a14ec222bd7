"""Reports over run folders: summary.csv and one self-contained report.html."""
