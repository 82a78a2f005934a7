"""What a run and an experiment are, named and checked: the settings, the names users choose, the
errors they see, the files a run folder holds. Free of torch: the workflow imports it while it plans."""
