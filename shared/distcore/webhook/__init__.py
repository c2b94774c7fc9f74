"""The webhook's parts below the notifier (distcore.notify): where its URL comes from and how it
is shown (`url`), one HTTP post under the client rule (`post`), and the hold that keeps a
flapping alert from paging at every return (`hold`). Loaded by `--serve` only."""
