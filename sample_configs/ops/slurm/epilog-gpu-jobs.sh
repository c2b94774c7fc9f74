#!/bin/bash
# Slurm Epilog on each GPU node: the job leaves the GPU map that prolog-gpu-jobs.sh wrote
# for DCGM's exporter (files of no job left are removed, so an idle GPU has no hpc_job).
#
# install -m 0755 epilog-gpu-jobs.sh /etc/slurm/epilog.d/50-gpu-jobs.sh
#
# Like the prolog it always ends 0: a failing epilog drains the node.
map_dir=${DCGM_JOB_MAP_DIR:-/run/dcgm-job-map}
job=${SLURM_JOB_ID:-}

say() { logger -t slurm-gpu-jobs -- "$*" 2>/dev/null || echo "slurm-gpu-jobs: $*" >&2; }

[[ $job =~ ^[0-9]+$ ]] || { say "epilog: no job id (${job:0:40})"; exit 0; }
[[ -d $map_dir ]] || exit 0
(
    flock -w 10 9 || { say "epilog: $map_dir is locked"; exit 0; }
    # Every GPU file, not SLURM_JOB_GPUS alone: a requeued job may have held others.
    for file in "$map_dir"/*; do
        [[ -f $file && ${file##*/} =~ ^[0-9]{1,4}$ ]] || continue
        grep -qx -- "$job" "$file" || continue
        rest=$(grep -vx -- "$job" "$file")
        if [[ -z $rest ]]; then
            rm -f -- "$file"
        else
            # Written beside and renamed: the exporter never reads half a file.
            printf '%s\n' "$rest" > "$file.tmp" && chmod 0644 -- "$file.tmp" && mv -f -- "$file.tmp" "$file"
        fi
    done
) 9> "$map_dir/.lock"
exit 0
