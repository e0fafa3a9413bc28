# The shoe's ESP32 image as a MicroPython board of its own (make BOARD_DIR=.../SABOT_ESP32):
# ESP32_GENERIC's settings, its partition table the shoe's (sdkconfig.board: the log's raw
# partition), its frozen manifest the board's (boards/esp32/manifest.py).
set(IDF_TARGET esp32)
set(SDKCONFIG_DEFAULTS
    boards/sdkconfig.base
    ${SDKCONFIG_IDF_VERSION_SPECIFIC}
    boards/sdkconfig.ble
    ${MICROPY_BOARD_DIR}/sdkconfig.board
)
set(MICROPY_FROZEN_MANIFEST ${MICROPY_BOARD_DIR}/../manifest.py)
