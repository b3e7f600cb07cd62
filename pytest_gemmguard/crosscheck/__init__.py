"""Second opinions on a wrong result: a wrong-looking autotune candidate compiled alone before it fails a case,
and a wrong winner's fault followed both ways (confirm.py); a failure's inputs through the run's other backends
(differential.py); on the CPU, a right result's compiled code run again with one thread per OpenMP team
(threads.py)."""
