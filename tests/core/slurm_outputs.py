"""Slurm 22.05's answers as the suite's own slurmctld printed them (captured), for the parser
and producer tests; tests/agent/test_slurm.py runs the real commands against a real cluster."""

SQUEUE = """4|CANCELLED|Priority|2026-12-01T11:48:41
2|COMPLETED|None|2026-12-01T11:48:40
3|PENDING|Resources|NONE
1|RUNNING|None|NONE
"""
SCONTROL_ONELINER = (
    "JobId=1 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 "
    "Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:07 TimeLimit=UNLIMITED\n"
    "JobId=3 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 "
    "Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=Resources Dependency=(null)\n"
)
SCONTROL_BLOCKS = """JobId=3 JobName=wrap
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901757 Nice=0 Account=(null) QOS=(null)
   JobState=TIMEOUT Reason=TimeLimit Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0

JobId=7 JobName=train
   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)
   StartTime=2026-12-01T11:48:38 EndTime=2026-12-01T11:48:40 Deadline=N/A
"""
SACCT = ("12|CANCELLED by 0|2026-12-01T11:48:40\n13|COMPLETED|2026-12-01T11:48:40\n"
         "14|OUT_OF_MEMORY|2026-12-01T11:48:40\n15|RUNNING|Unknown\n16|CANCELLED+|Unknown\n")
ENDED = "2026-12-01T11:48:40"
# `squeue --noheader --steps --format=%i --jobs=1,2` with job 1's batch script and step 0
# running, and job 2 a batch script whose srun step 0 ended (captured from the suite's cluster).
SQUEUE_STEPS = "1.0\n1.batch\n2.batch\n"
# What this machine's sacct answers without slurmdbd (exit 1), and its parsable2 format where a
# database answers (JobIDRaw|State, one line per allocation).
SACCT_DISABLED = "Slurm accounting storage is disabled\n"
