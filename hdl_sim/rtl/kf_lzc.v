// kf_lzc: leading-zero count of a W-bit vector (combinational).
//   count = number of zero bits above the most significant one; count = W when in == 0.
//   CW must satisfy 2**CW > W.
`default_nettype none
module kf_lzc #(
    parameter W  = 32,
    parameter CW = 6
) (
    input  wire [W-1:0]  in,
    output wire [CW-1:0] count
);
    integer i;
    integer n;
    always @* begin
        n = W;
        for (i = 0; i < W; i = i + 1) begin
            if (in[i]) n = W - 1 - i;
        end
    end
    assign count = n[CW-1:0];
    wire unused_hi = |n[31:CW];  // n never exceeds W
endmodule
`default_nettype wire
