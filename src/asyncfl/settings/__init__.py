"""What a run is told, named and checked: its settings and their rules, the names users choose (algorithms,
figures, populations, device classes), the files a setting points at (YAML, traces), the errors users see.
Free of torch: the workflow imports it while it plans."""
