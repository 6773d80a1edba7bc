B
ReduceL2_dJ oô1@XŠg@@§€@óÈ*@€Œ@KZ{@B×8@Ä}X@