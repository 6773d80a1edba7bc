B
ReduceL1_kJ ¤kA;L-Aò\AìAŒbA&CAJAì+A