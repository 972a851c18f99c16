"""Fleet analysis: records as pandas frames, comparability keys, classes, health findings."""
