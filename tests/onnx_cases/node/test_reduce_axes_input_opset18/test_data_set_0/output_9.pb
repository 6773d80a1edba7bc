BReduceLogSum_dJ Ï@y@œÄ'@…”@•Ÿ)@¸
 @ ó
@¦'@