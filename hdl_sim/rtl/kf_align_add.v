// kf_align_add: exact-enough signed addition of two unpacked operands (combinational).
//   Operand x is (s, z, e, m): value (-1)**s * m / 2**(SW-1) * 2**(e - BIAS), z marks zero.
//   Nonzero operands must have their leading one at bit SW-1 or SW-2, or both operands must
//   share the exponent (subnormal pairs).  The smaller-exponent operand is shifted right with
//   its lost bits ORed into the last bit, which keeps round-to-nearest-even exact because
//   cancellation of more than two bits can only happen without loss.
//   Output (sign, zero, exp, sig) has sig of SW+4 bits with value sig / 2**(SW+3) * 2**(exp -
//   BIAS), ready for kf_round.  An exact zero sum is +0 unless both operands are -0.
`default_nettype none
module kf_align_add #(
    parameter SW = 24,
    parameter XW = 10
) (
    input  wire          sa,
    input  wire          za,
    input  wire [XW-1:0] ea,
    input  wire [SW-1:0] ma,
    input  wire          sb,
    input  wire          zb,
    input  wire [XW-1:0] eb,
    input  wire [SW-1:0] mb,
    output reg           sign,
    output reg           zero,
    output reg  [XW-1:0] exp,
    output reg  [SW+3:0] sig
);
    localparam RW = SW + 4;
    localparam integer RWI = RW;
    localparam [XW-1:0] RWX = RWI[XW-1:0];
    localparam [XW-1:0] ONE = 1;

    reg          a_big;
    reg          s_big;
    reg          s_small;
    reg [XW-1:0] e_big;
    reg [XW-1:0] shamt;
    reg [RW-1:0] w_big;
    reg [RW-1:0] w_small;
    reg [RW-1:0] w_shift;
    reg [RW:0]   diff;

    always @* begin
        a_big = zb | (~za & ($signed(ea) >= $signed(eb)));
        s_big = a_big ? sa : sb;
        s_small = a_big ? sb : sa;
        e_big = a_big ? ea : eb;
        shamt = a_big ? ea - eb : eb - ea;
        if (za | zb | shamt[XW-1] | ($signed(shamt) > $signed(RWX))) shamt = RWX;
        w_big = (za & zb) ? {RW{1'b0}} : {1'b0, a_big ? ma : mb, 3'b000};
        w_small = (za | zb) ? {RW{1'b0}} : {1'b0, a_big ? mb : ma, 3'b000};
        w_shift = w_small >> shamt;
        w_shift[0] = w_shift[0] | ((w_small & ~({RW{1'b1}} << shamt)) != {RW{1'b0}});
        sign = s_big;
        if (s_big ^ s_small) begin
            diff = {1'b0, w_big} - {1'b0, w_shift};
            if (diff[RW]) begin
                sig = {RW{1'b0}} - diff[RW-1:0];
                sign = s_small;
            end else begin
                sig = diff[RW-1:0];
            end
        end else begin
            diff = {(RW+1){1'b0}};
            sig = w_big + w_shift;
        end
        zero = sig == {RW{1'b0}};
        if (za & zb) sign = sa & sb;
        else if (zero) sign = 1'b0;
        exp = e_big + ONE;
    end
endmodule
`default_nettype wire
