# The tiled kernel's configuration of checkpoint 18 (only the small-M kernels are timed).
BASE="BLOCK_X=32 BLOCK_Y=8 MIN_BLOCKS=1 NUM_STAGES=2 OFFSET_AMOUNT=0 SWIZZLE_WIDTH=1 TILE_K=16 TRD_CHUNK=4 TRD_K_DIM=1 TRD_X_DIM=8 TRD_Y_DIM=16 WARP_X_DIM=16 WARP_Y_DIM=2"
