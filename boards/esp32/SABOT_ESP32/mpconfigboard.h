// The shoe's ESP32 image (boards/esp32/SABOT_ESP32): a generic ESP32 module.
#define MICROPY_HW_BOARD_NAME "sabot shoe (ESP32)"
#define MICROPY_HW_MCU_NAME "ESP32"
