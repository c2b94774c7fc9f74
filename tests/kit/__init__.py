"""The test kit: one of each helper the tests share (waiting for a state, free ports, an sshd,
a webhook receiver, a Slurm cluster, event-file writers), so a fix to one reaches every test."""
