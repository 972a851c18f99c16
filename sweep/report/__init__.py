"""The report: comparison and findings rendered as report.html, CSV, summary.json and summary.md."""
