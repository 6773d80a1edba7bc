B
ReduceL2_kJ oô1@XŠg@@§€@óÈ*@€Œ@KZ{@B×8@Ä}X@