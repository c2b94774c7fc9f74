#!/bin/bash
# Slurm Prolog on each GPU node: which Slurm job holds which GPU, for DCGM's exporter.
# dcgm-exporter --hpc-job-mapping-dir /run/dcgm-job-map (or DCGM_HPC_JOB_MAPPING_DIR) reads
# one file per GPU index holding the ids of the jobs on it, and labels that GPU's series
# hpc_job="<id>"; distmon_job_info carries the same id as slurm_job_id, so DCGM's GPU figures
# join distmon's jobs (docs/operations.md). The epilog beside this file takes the job out again.
#
# slurm.conf:  Prolog=/etc/slurm/prolog.d/*   Epilog=/etc/slurm/epilog.d/*
# install -m 0755 prolog-gpu-jobs.sh /etc/slurm/prolog.d/50-gpu-jobs.sh
#
# Slurm runs it as root with SLURM_JOB_ID and SLURM_JOB_GPUS (the job's GPU indices on this
# node, "0,1"). A prolog that exits non-zero drains the node: whatever goes wrong here is
# logged and ends 0, since a missing label is better than a node out of service.
map_dir=${DCGM_JOB_MAP_DIR:-/run/dcgm-job-map}
job=${SLURM_JOB_ID:-}
gpus=${SLURM_JOB_GPUS:-}

say() { logger -t slurm-gpu-jobs -- "$*" 2>/dev/null || echo "slurm-gpu-jobs: $*" >&2; }

# Only a number is a job id, only numbers are GPU indices: nothing else becomes a path.
[[ $job =~ ^[0-9]+$ ]] || { say "prolog: no job id (${job:0:40})"; exit 0; }
[[ -n $gpus ]] || exit 0  # a CPU-only job on this node
mkdir -p -m 0755 -- "$map_dir" || { say "prolog: cannot make $map_dir"; exit 0; }
# The map is root's alone: in a directory another account may write (or reached through a link)
# a link or FIFO planted under a GPU's name would have root write through it or wait on it.
[[ ! -L $map_dir ]] && cd -P -- "$map_dir" && owner_mode=$(stat -c %u:%a .) &&
    [[ $owner_mode =~ ^$(id -u):[0-7]?[0-7][0145][0145]$ ]] ||
    { say "prolog: $map_dir: a link, not $(id -un)'s, or writable by others: left alone"; exit 0; }
(
    # Jobs sharing a node start and end at once: one writer at a time (the directory's own
    # lock: no lock file to plant a link as).
    flock -w 10 9 || { say "prolog: $map_dir is locked"; exit 0; }
    IFS=, read -ra indices <<< "$gpus"
    for gpu in "${indices[@]}"; do
        [[ $gpu =~ ^[0-9]{1,4}$ ]] ||
            { say "prolog: job $job: GPU '${gpu:0:20}' skipped"; continue; }
        if [[ -L $gpu || ( -e $gpu && ! -f $gpu ) ]]; then
            say "prolog: job $job: $map_dir/$gpu is not a plain file: left alone"; continue
        fi
        # Shared GPUs (sharding, oversubscription) list every job on them, once each.
        [[ -f $gpu ]] && grep -qx -- "$job" "$gpu" && continue
        # A new file renamed onto the name: nothing there is written through, and the
        # exporter never reads half a file.
        tmp=$(mktemp -p . ".$gpu.XXXXXX") || { say "prolog: cannot write $map_dir"; continue; }
        { [[ -f $gpu ]] && cat -- "$gpu"; echo "$job"; } > "$tmp" && chmod 0644 -- "$tmp" &&
            mv -fT -- "$tmp" "$gpu" ||
            { rm -f -- "$tmp"; say "prolog: cannot write $map_dir/$gpu"; }
    done
) 9< .
exit 0
