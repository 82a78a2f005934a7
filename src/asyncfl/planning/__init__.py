"""What a workflow runs, from its config: the experiments' checks, their runs and the jobs that train them,
the cluster's resources and runtimes, tuning, and where every file goes. Free of torch (it builds on
`settings` alone): the workflow imports it while it plans the DAG."""
