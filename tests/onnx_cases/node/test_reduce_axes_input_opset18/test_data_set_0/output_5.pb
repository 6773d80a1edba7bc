B
ReduceL1_dJ ¤kA;L-Aò\AìAŒbA&CAJAì+A