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
[[ -e $map_dir || -L $map_dir ]] || exit 0
# Only a directory of root's alone, as the prolog checks: nothing planted there is followed.
[[ ! -L $map_dir ]] && cd -P -- "$map_dir" && owner_mode=$(stat -c %u:%a .) &&
    [[ $owner_mode =~ ^$(id -u):[0-7]?[0-7][0145][0145]$ ]] ||
    { say "epilog: $map_dir: a link, not $(id -un)'s, or writable by others: left alone"; exit 0; }
(
    flock -w 10 9 || { say "epilog: $map_dir is locked"; exit 0; }
    # Every GPU file, not SLURM_JOB_GPUS alone: a requeued job may have held others.
    for file in *; do
        [[ $file =~ ^[0-9]{1,4}$ && -f $file && ! -L $file ]] || continue
        grep -qx -- "$job" "$file" || continue
        rest=$(grep -vx -- "$job" "$file")
        if [[ -z $rest ]]; then
            rm -f -- "$file"
        else
            # A new file renamed onto the name: the exporter never reads half a file.
            tmp=$(mktemp -p . ".$file.XXXXXX") || { say "epilog: cannot write $map_dir"; continue; }
            printf '%s\n' "$rest" > "$tmp" && chmod 0644 -- "$tmp" && mv -fT -- "$tmp" "$file" ||
                { rm -f -- "$tmp"; say "epilog: cannot write $map_dir/$file"; }
        fi
    done
) 9< .
exit 0
